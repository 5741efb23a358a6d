"""The disruptions of `asynctrain bench async`'s scenarios, timed on the training clock: a worker
lost (SIGKILLed, started again later) and a parameter server's link cut.

The bench stops its clock while it scores a round's weights, so a disruption's length is counted
in seconds of training (`TrainingClock`), and both sides of a comparison lose the same training
time whatever their scoring costs.
"""

from __future__ import annotations

import threading
import time


class TrainingClock:
    """Wall time that runs only between `resume` and `pause`: the seconds spent training, from
    `start_s` (a run restarted from a checkpoint goes on from where its first attempt stopped)."""

    def __init__(self, start_s: float = 0.0):
        self._changed = threading.Condition()
        self._total = start_s
        self._since: float | None = None
        self.cancelled = False

    def resume(self) -> None:
        with self._changed:
            if self._since is None:
                self._since = time.monotonic()
            self._changed.notify_all()

    def pause(self) -> None:
        with self._changed:
            if self._since is not None:
                self._total += time.monotonic() - self._since
                self._since = None
            self._changed.notify_all()

    def seconds(self) -> float:
        with self._changed:
            return self._seconds()

    def _seconds(self) -> float:
        running = time.monotonic() - self._since if self._since is not None else 0.0
        return self._total + running

    def cancel(self) -> None:
        """Ends every `wait_until` at once (the run is over)."""
        with self._changed:
            self.cancelled = True
            self._changed.notify_all()

    def wait_until(self, seconds: float) -> bool:
        """Blocks until the clock reads `seconds`; False if cancelled first."""
        with self._changed:
            while not self.cancelled:
                remaining = seconds - self._seconds()
                if remaining <= 0:
                    return True
                # While paused the clock cannot move: wait for `resume` (or `cancel`).
                self._changed.wait(remaining if self._since is not None else None)
            return False


class Disruption:
    """A scenario's disruption of an `EmulatedCluster` on a thread of its own, started with
    `start()`; `events` records what happened at which second of training.

    Args:
      scenario: an `async_scenarios.Scenario` with `worker_lost_s` or `ps_link_cut_s`.
      emulated: the `EmulatedCluster` it disrupts (its last worker, its parameter server 0).
      clock: the run's `TrainingClock`.
    """

    def __init__(self, scenario, emulated, clock: TrainingClock):
        self._scenario = scenario
        self._emulated = emulated
        self._clock = clock
        self._thread = threading.Thread(target=self._run, name='disruption', daemon=True)
        self.events: list[dict] = []
        self.error: BaseException | None = None

    def start(self) -> None:
        self._thread.start()

    def join(self) -> None:
        """Cancels what has not happened yet and waits for the thread; raises its error."""
        self._clock.cancel()
        self._thread.join()
        if self.error is not None:
            raise self.error

    def _record(self, event: str) -> None:
        self.events.append({'event': event, 'training_s': self._clock.seconds()})

    def _run(self) -> None:
        try:
            if self._scenario.worker_lost_s:
                self._lose_worker(self._scenario.worker_lost_s)
            if self._scenario.ps_link_cut_s:
                self._cut_ps_link(self._scenario.ps_link_cut_s)
        except BaseException as error:  # handed to `join`, in the bench's thread
            self.error = error

    def _lose_worker(self, down_s: float) -> None:
        from asynctrain.components.trainer.cluster import servers

        host = self._emulated.host(servers.WORKER, len(self._emulated.cluster_spec['worker']) - 1)
        host.kill()
        self._record(f'worker-{host.index} killed')
        if self._clock.wait_until(self._clock.seconds() + down_s):
            host.restart()
            self._record(f'worker-{host.index} listening again')

    def _cut_ps_link(self, cut_s: float) -> None:
        from asynctrain.components.trainer.cluster import servers

        link = self._emulated.host(servers.PS, 0).link
        link.cut()
        self._record('ps-0 link cut')
        try:
            self._clock.wait_until(self._clock.seconds() + cut_s)
        finally:
            link.restore()
            self._record('ps-0 link restored')
