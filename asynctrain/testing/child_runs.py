"""A bench's variant run in a child process, and its peak memory: the child's process tree's
resident set sampled from outside, or the peak the child reports of itself.

A bench runs each variant in a fresh interpreter, so that none inherits another's imports or
TensorFlow state and each one's memory is its own, in one of two ways:

- `run_spawned(target, args)`: a Python callable in a spawned interpreter; what it puts on its
  queue comes back, with its process tree's peak resident set sampled from here;
- `run_module(module, argv)`: `python -m module ...`, whose result is the JSON object on the last
  line of its standard output; a child that measures itself reports `own_peak_rss_mb()`, or what a
  `TreeRssSampler` of its own saw, in that JSON.

`TreeRssSampler` samples the resident set of a process and of all its descendants every
`interval` seconds, with a wall-clock timestamp. Under LocalDagRunner the components run one
after another in one process, and some start children of their own (the Trainer's cluster; Beam's
workers in multi-process mode): `component_peaks_mb` gives each component the largest sample
taken between its execution's creation and its last update in ML Metadata (driver, executor and
publisher), the same interval that a bench times. That is the whole process tree's RSS, so a
component's peak includes what earlier components left imported or cached in the process
(TensorFlow, Beam): compare components of one run with that baseline in mind (the first sample).
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import psutil

_MB = 1 << 20


def tree_rss_bytes(process: psutil.Process) -> int:
    """RSS of `process` and all its descendants (processes that vanish meanwhile count 0)."""
    total = 0
    try:
        members = [process, *process.children(recursive=True)]
    except psutil.NoSuchProcess:  # the sampled process itself has ended
        return 0
    for member in members:
        try:
            total += member.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return total


@dataclasses.dataclass
class Samples:
    """(wall-clock seconds, bytes) pairs, in time order."""

    times: list[float] = dataclasses.field(default_factory=list)
    rss: list[int] = dataclasses.field(default_factory=list)

    def peak_mb(self, start: float, end: float) -> float | None:
        """Largest sample within [start, end], in MiB; None when no sample falls inside."""
        inside = [b for t, b in zip(self.times, self.rss) if start <= t <= end]
        return max(inside) / _MB if inside else None


class TreeRssSampler:
    """Samples the process tree's RSS on a daemon thread between `start()` and `stop()`."""

    def __init__(self, interval: float = 0.2, pid: int | None = None):
        self._interval = interval
        self._process = psutil.Process(pid)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._loop, name='rss-sampler', daemon=True)
        self.samples = Samples()

    def _sample(self) -> None:
        self.samples.times.append(time.time())
        self.samples.rss.append(tree_rss_bytes(self._process))

    def _loop(self) -> None:
        while not self._stopped.wait(self._interval):
            self._sample()

    def start(self) -> TreeRssSampler:
        self._sample()
        self._thread.start()
        return self

    def stop(self) -> Samples:
        self._stopped.set()
        self._thread.join()
        self._sample()
        return self.samples


def run_spawned(target: Callable[..., None], args: tuple) -> tuple[Any, float] | None:
    """`target(*args, queue)` in a fresh (spawned) interpreter, its process tree's RSS sampled
    from here: (what it put on the queue, its peak in MiB), or None when it failed. `target` must
    be importable by the child (a top-level function of an installed module)."""
    spawn = multiprocessing.get_context('spawn')
    queue = spawn.Queue()
    child = spawn.Process(target=target, args=(*args, queue))
    child.start()
    sampler = TreeRssSampler(interval=0.2, pid=child.pid).start()
    child.join()
    samples = sampler.stop()
    if child.exitcode != 0:
        return None
    return queue.get(), max((b for b in samples.rss if b), default=0) / _MB


@dataclasses.dataclass(frozen=True)
class ModuleRun:
    """What a `python -m` child left behind.

    Attributes:
      returncode: its exit status.
      result: the JSON object on the last line of its standard output; None when it exited with
        a non-zero status.
      stderr: everything it wrote to standard error (its progress lines, or why it failed).
    """

    returncode: int
    result: dict | None
    stderr: str


def run_module(module: str, argv: Sequence[str], env: Mapping[str, str] | None = None) -> ModuleRun:
    """`python -m module *argv` with this interpreter, in a fresh process (with `env`, else this
    process's environment); waits for it and reads its result back."""
    done = subprocess.run(
        [sys.executable, '-m', module, *argv],
        capture_output=True,
        text=True,
        check=False,
        env=None if env is None else dict(env),
    )
    result = None
    if done.returncode == 0:
        result = json.loads(done.stdout.strip().splitlines()[-1])
    return ModuleRun(done.returncode, result, done.stderr)


def own_peak_rss_mb() -> float:
    """The peak resident set, in MiB, of this process or of the largest child it has waited for
    (the kernel's high-water marks, `getrusage`): what a child run reports of itself."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return round(max(own, children) / 1024, 1)


def component_peaks_mb(
    samples: Samples, intervals: dict[str, tuple[float, float]]
) -> dict[str, float]:
    """Each component's peak MiB over its (start, end) wall-clock interval, in seconds.

    A component shorter than the sampling interval can hold no sample: it gets the larger of
    the samples just before and just after it, which bound its resident set from the outside.
    """
    peaks = {}
    for name, (start, end) in intervals.items():
        peak = samples.peak_mb(start, end)
        if peak is None:
            before = [b for t, b in zip(samples.times, samples.rss) if t < start]
            after = [b for t, b in zip(samples.times, samples.rss) if t > end]
            around = before[-1:] + after[:1]
            peak = max(around) / _MB if around else 0.0
        peaks[name] = round(peak, 1)
    return peaks
