"""Peak memory of each pipeline component, from a resident-set sampler and ML Metadata's times.

Under LocalDagRunner the components run one after another in one process, and some start
children of their own (the Trainer's cluster; Beam's workers in multi-process mode). A thread
samples the resident set of this process and of all its descendants every `interval` seconds,
with a wall-clock timestamp. After the run, each component's peak is the largest sample taken
between its execution's creation and its last update in ML Metadata (driver, executor and
publisher), the same interval that `component_seconds` times.

What this measures is the whole process tree's RSS, so a component's peak includes what earlier
components left imported or cached in the process (TensorFlow, Beam): compare components of one
run with that baseline in mind (`baseline_mb`, the first sample, is recorded beside them).
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import threading
import time
from collections.abc import Callable
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


def run_in_child(target: Callable[..., None], args: tuple) -> tuple[Any, float] | None:
    """`target(*args, queue)` in a fresh (spawned) interpreter, its process tree's RSS sampled
    from here: (what it put on the queue, its peak in MiB), or None when it failed. A bench's
    variants each get one, so that none inherits another's imports or TensorFlow state."""
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
