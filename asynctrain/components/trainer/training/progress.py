"""Live training progress on the console: steps done / total, examples/s, loss, staleness and time
left, drawn by `tqdm`.

On a terminal the line is updated in place; when output is not a terminal (CI logs, files) a
plain line, formatted by tqdm's own `format_meter`, is printed at most every `plain_interval`
seconds, so a log holds a readable line per interval rather than carriage returns. It writes to
stdout: a run's stderr goes to its log file (`asynctrain.components.shared.console`), the progress to the reader.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from tqdm import tqdm

PLAIN_INTERVAL_SECONDS = 10.0


class TrainingProgress:
    """One training run's progress line; `update` after each summary, `close` at the end."""

    def __init__(
        self,
        total_steps: int,
        initial_step: int = 0,
        out: TextIO | None = None,
        plain_interval: float = PLAIN_INTERVAL_SECONDS,
        interactive: bool | None = None,
    ):
        self.out = out or sys.stdout
        self.total = total_steps
        self.initial = initial_step
        self.step = initial_step
        self.plain_interval = plain_interval
        self.interactive = self.out.isatty() if interactive is None else interactive
        self._started = time.monotonic()
        self._last_plain = -float('inf')
        self._printed_step = initial_step
        self._postfix = ''
        self._bar = None
        if self.interactive:
            self._bar = tqdm(
                total=total_steps,
                initial=initial_step,
                desc='train',
                unit='step',
                file=self.out,
                dynamic_ncols=True,
                leave=True,
            )

    @staticmethod
    def postfix(examples_per_sec: float, loss: float, staleness_mean: float) -> str:
        return f'{examples_per_sec:,.0f} ex/s, loss {loss:.4f}, staleness {staleness_mean:.2f}'

    def update(
        self, step: int, examples_per_sec: float, loss: float, staleness_mean: float
    ) -> None:
        self._postfix = self.postfix(examples_per_sec, loss, staleness_mean)
        advanced = max(0, min(step, self.total) - self.step)
        self.step = max(self.step, min(step, self.total))
        if self._bar is not None:
            self._bar.set_postfix_str(self._postfix, refresh=False)
            self._bar.update(advanced)
            return
        now = time.monotonic()
        if now - self._last_plain >= self.plain_interval or self.step >= self.total:
            self._last_plain = now
            self._print_plain(now)

    def plain_line(self, now: float | None = None) -> str:
        """The progress as one line: `train: 40%|...| 400/1000 [00:10<00:15, ...] postfix`."""
        elapsed = (now if now is not None else time.monotonic()) - self._started
        return tqdm.format_meter(
            n=self.step,
            total=self.total,
            elapsed=elapsed,
            initial=self.initial,
            ncols=100,
            prefix='train',
            unit='step',
            postfix=self._postfix,
        )

    def _print_plain(self, now: float) -> None:
        self._printed_step = self.step
        print(self.plain_line(now), file=self.out, flush=True)

    def close(self) -> None:
        """Ends the line; a plain run prints the last state unless it is printed already."""
        if self._bar is not None:
            self._bar.close()
        elif self.step != self._printed_step:
            self._print_plain(time.monotonic())
