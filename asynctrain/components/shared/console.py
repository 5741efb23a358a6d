"""What a run shows on the console, and what goes only to its log file.

TensorFlow's C++ logging, gRPC and libprotobuf write straight to file descriptor 2, which Python's
`redirect_stderr` does not reach, and child processes (the Trainer's cluster) inherit it. So the
run points descriptor 2 itself at the log file (`stderr_to_log`): every such line, from this
process and its children, lands in the log and none on the console, while asynctrain's own lines
go to stdout. After each component the new part of the log is scanned for signs of real trouble
(`scan`), and one line on the console says what was found (`trouble_line`); when a component
fails, `lines_that_matter` picks the log's last telling lines for the console. While a long stage
runs, `ElapsedLine` shows its elapsed time.
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import sys
import threading
import time
from collections.abc import Iterator
from typing import TextIO

# Signs of real trouble in a log, by name. TF's "Failed to remove function remotely" lines at a
# cluster's teardown are not among them: they are noise (see issue 15).
TROUBLE = {
    'libprotobuf ERROR': re.compile(r'libprotobuf ERROR'),
    'Unable to parse request': re.compile(r'Unable to parse request'),
    'Check failed': re.compile(r'Check failed'),
    'fatal': re.compile(r'^F\d{4} |\] F |Fatal Python error|\bFATAL\b'),
    'out of memory': re.compile(r'out of memory|OOM when allocating|MemoryError|ResourceExhausted'),
}
# Lines worth showing when a component fails: errors and the exception lines of tracebacks.
_MATTERS = re.compile(
    r'(^Traceback|^[\w.]+(Error|Exception|Failed)\b|\bERROR\b|^[EF]\d{4} |Check failed|libprotobuf)'
)
_NOISE = re.compile(
    r'Failed to remove function remotely|Additional GRPC error information|'
    r'This could happen if the remote target|Unable to register \w+ factory'
)


def new_log_path(work_dir: str, prefix: str = 'run') -> str:
    """`<work_dir>/logs/<prefix>-YYYYmmdd-HHMMSS.log`, its directory created."""
    path = os.path.join(work_dir, 'logs', time.strftime(f'{prefix}-%Y%m%d-%H%M%S.log'))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return path


def quiet(log_path: str, verbose: bool = False) -> contextlib.AbstractContextManager:
    """`stderr_to_log(log_path)`, or, `verbose`, nothing: everything stays on the console."""
    return contextlib.nullcontext() if verbose else stderr_to_log(log_path)


@contextlib.contextmanager
def stderr_to_log(log_path: str) -> Iterator[None]:
    """Points file descriptor 2 of this process (and of the children it starts meanwhile) at the
    end of `log_path`; restores it on exit."""
    sys.stderr.flush()
    saved = os.dup(2)
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(log_fd, 2)
    finally:
        os.close(log_fd)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def log_size(log_path: str) -> int:
    """Where the log ends now: what `scan` starts from for the next component."""
    try:
        return os.path.getsize(log_path)
    except OSError:
        return 0


def _read_from(log_path: str, offset: int) -> list[str]:
    try:
        with open(log_path, encoding='utf-8', errors='replace') as f:
            f.seek(offset)
            return f.read().splitlines()
    except OSError:
        return []


def scan(log_path: str, offset: int = 0) -> dict[str, list[str]]:
    """The lines of `log_path` from `offset` on that show trouble, by kind (kinds with none are
    left out)."""
    found = collections.defaultdict(list)
    for line in _read_from(log_path, offset):
        for name, pattern in TROUBLE.items():
            if pattern.search(line):
                found[name].append(line.strip())
                break
    return dict(found)


def trouble_line(found: dict[str, list[str]], log_path: str) -> str:
    """One console line for `scan`'s result; '' when there is nothing to report."""
    if not found:
        return ''
    counts = ', '.join(f'{name} x{len(lines)}' for name, lines in found.items())
    first = next(iter(found.values()))[0]
    return f'    log: {counts} (first: {first[:120]}); see {log_path}'


def lines_that_matter(log_path: str, offset: int = 0, limit: int = 12) -> list[str]:
    """The last `limit` lines from `offset` on that say what went wrong, noise left out."""
    lines = [
        line.rstrip()
        for line in _read_from(log_path, offset)
        if _MATTERS.search(line.strip()) and not _NOISE.search(line)
    ]
    return lines[-limit:]


class ElapsedLine:
    """A running stage's elapsed time, until `close`: on a terminal one line that tqdm redraws in
    place every second (and erases at the end); otherwise a plain `<label>: running, Ns` line
    every `plain_interval` seconds, so a CI log shows that the run is alive."""

    def __init__(
        self,
        label: str,
        out: TextIO,
        plain_interval: float = 30.0,
        interactive: bool | None = None,
    ):
        self.label = label
        self.out = out
        self.plain_interval = plain_interval
        self.interactive = out.isatty() if interactive is None else interactive
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._bar = None
        if self.interactive:
            from tqdm import tqdm

            self._bar = tqdm(
                total=None,
                desc=label,
                bar_format='{desc}: running... {elapsed}',
                file=out,
                leave=False,
            )
        self._thread = threading.Thread(target=self._tick, name=f'elapsed {label}', daemon=True)
        self._thread.start()

    def _tick(self) -> None:
        interval = 1.0 if self._bar is not None else self.plain_interval
        while not self._stop.wait(interval):
            if self._bar is not None:
                self._bar.refresh()
            else:
                seconds = time.monotonic() - self._started
                print(f'{self.label}: running, {seconds:.0f}s', file=self.out, flush=True)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        if self._bar is not None:
            self._bar.close()
