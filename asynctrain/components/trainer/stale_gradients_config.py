"""`StaleGradientsConfig`: the `trainer.stale_gradients` section of `TrainerConfig`, the
switches of `training.gradient_remedies`. A module of its own beside `config`, which holds the
other sections and checks that Top-K runs with the `sgd` optimizer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from asynctrain.components.shared import yaml_config

DELAY_COMPENSATION_MODES = ('off', 'constant', 'adaptive')


def _fail(field: str, message: str) -> None:
    yaml_config.fail(f'trainer.stale_gradients.{field}', message)


def _check_number(field: str, value, in_range: Callable[[float], bool], allowed: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not in_range(value):
        _fail(field, f'got {value!r}; allowed: {allowed}')


@dataclasses.dataclass(frozen=True)
class StaleGradientsConfig:
    """Remedies for stale gradients, applied by each worker to its dense variables' gradients
    (see `training.gradient_remedies`). Both are off by default: on 4 workers with one at a
    quarter of the others' CPU or behind a 20 +/- 20 ms link (`asynctrain bench async`,
    docs/benchmarks.md), neither moved the held-out AUC by more than its round-to-round noise
    (0.002), DC-ASGD sent 32% more bytes per step at 1-28% fewer examples/s, and Top-K at 1% cut
    the bytes per step by only 12% (the weights the workers read are 94% of them) at 7-12% fewer
    examples/s. With 8 workers (mean staleness 4.2, twice as much) neither moved the final AUC by
    more than 0.001.

    Attributes:
      top_k_fraction: Top-K sparsification with error feedback: 0 (the default) is off; in
        (0, 1), each worker adds its residual to each dense gradient, sends only the
        round(fraction * entries) largest-magnitude entries (values and indices, applied with a
        scatter on the parameter server) and keeps the rest as its new residual. Needs
        `training.optimizer: sgd`.
      delay_compensation: One of `DELAY_COMPENSATION_MODES`: `off` (the default); `constant`:
        DC-ASGD (Zheng et al., 2017), g + lambda * g * g * (w_now - w_read), where w_read are the
        weights the step read before its forward pass and w_now a fresh read at apply time, with
        lambda = `delay_compensation_lambda`; `adaptive`: DC-ASGD-a, lambda =
        `delay_compensation_lambda` / sqrt(a moving average of g * g), per entry.
      delay_compensation_lambda: lambda for `constant`, lambda0 for `adaptive`; the default is
        a starting point: the bench ran it, no other value was tried.
      delay_compensation_momentum: `adaptive` only: the moving average's m, in [0, 1).
    """

    top_k_fraction: float = 0.0
    delay_compensation: str = 'off'
    delay_compensation_lambda: float = 0.04
    delay_compensation_momentum: float = 0.95

    def __post_init__(self):
        _check_number(
            'top_k_fraction',
            self.top_k_fraction,
            lambda f: f == 0 or 0 < f < 1,
            '0 (off) or a fraction in (0, 1)',
        )
        if self.delay_compensation not in DELAY_COMPENSATION_MODES:
            _fail(
                'delay_compensation',
                f'got {self.delay_compensation!r}; allowed: {list(DELAY_COMPENSATION_MODES)}',
            )
        _check_number(
            'delay_compensation_lambda',
            self.delay_compensation_lambda,
            lambda v: v > 0,
            'values > 0',
        )
        _check_number(
            'delay_compensation_momentum',
            self.delay_compensation_momentum,
            lambda m: 0 <= m < 1,
            '[0, 1)',
        )

    @property
    def enabled(self) -> bool:
        """Whether any remedy is on."""
        return self.top_k_fraction > 0 or self.delay_compensation != 'off'
