"""The named scenarios of `asynctrain bench async`: how the emulated hosts differ (CPU budgets,
links, a lost worker, a cut parameter-server link) and which Trainer config overrides a variant
adds (the stale-gradient remedies join as variants of the slow-host scenario).

A scenario's disruption (a lost worker, a cut link) starts at `DISRUPT_AT` of the run: at the
start of the round that begins there.
"""

from __future__ import annotations

import dataclasses

# A full host's CPU budget (`--host-cpus` changes it); a slow host gets a quarter of it.
FULL_CPUS = 1.0
# Where in the run a disruption starts, as a share of its rounds (the "at 30% of the run").
DISRUPT_AT = 0.3


@dataclasses.dataclass(frozen=True)
class Scenario:
    """One variant of the bench.

    Attributes:
      name: how the report names it.
      slow_worker_cpus: the last worker's CPU budget as a share of the others' (1.0: equal).
      worker_latency_ms: latency, with as much jitter, on the last worker's link (0: none).
      worker_lost_s: the last worker is SIGKILLed at `DISRUPT_AT` of the run and started again
        this many seconds of training later (0: never).
      ps_link_cut_s: the parameter server's link refuses every connection from `DISRUPT_AT` of
        the run for this many seconds of training (0: never).
      overrides: Trainer config overrides, `(section.field, value)` pairs.
      references: whether the synchronous references run it too (a remedy of ours, or a
        parameter server's link, has no synchronous counterpart).
      baseline: for a remedy's variant, the scenario it is compared with (plain asynchronous
        training on the same hosts, with the optimizer the remedy needs); '' otherwise.
    """

    name: str
    slow_worker_cpus: float = 1.0
    worker_latency_ms: float = 0.0
    worker_lost_s: float = 0.0
    ps_link_cut_s: float = 0.0
    overrides: tuple[tuple[str, object], ...] = ()
    references: bool = True
    baseline: str = ''

    def worker_cpus(self, num_workers: int, full_cpus: float = FULL_CPUS) -> list[float]:
        """Each worker's CPU budget, the last one's scaled by `slow_worker_cpus`."""
        return [full_cpus] * (num_workers - 1) + [full_cpus * self.slow_worker_cpus]

    @property
    def disrupted(self) -> bool:
        return bool(self.worker_lost_s or self.ps_link_cut_s)


def disruption_round(rounds: int) -> int:
    """The round (0-based) at whose start a disruption begins: the first at or after
    `DISRUPT_AT` of the run, and never the first (the run must be under way)."""
    return min(rounds - 1, max(1, round(DISRUPT_AT * rounds)))


# Plain asynchronous training with SGD: Top-K's baseline (Top-K applies its entries as SGD).
_SGD = (('training.optimizer', 'sgd'),)
_REMEDIES = {
    'staleness_lr': (('training.staleness_aware_learning_rate', True),),
    'dc_constant': (('stale_gradients.delay_compensation', 'constant'),),
    'dc_adaptive': (('stale_gradients.delay_compensation', 'adaptive'),),
    'sgd': _SGD,
    'sgd_topk1': (*_SGD, ('stale_gradients.top_k_fraction', 0.01)),
    'sgd_topk10': (*_SGD, ('stale_gradients.top_k_fraction', 0.1)),
}
_BASE = (
    Scenario('equal'),
    Scenario('quarter_cpu', slow_worker_cpus=0.25),
    # The references' workers behind proxies too, the last one's as slow (`_reference_links`).
    Scenario('latency_20ms', worker_latency_ms=20.0),
    Scenario('worker_lost', worker_lost_s=20.0),
    Scenario('ps_link_cut', ps_link_cut_s=10.0, references=False),
)
# Each remedy under the straggler and under the jittery link, ours only.
_VARIANTS = tuple(
    dataclasses.replace(
        base,
        name=f'{base.name}+{remedy}',
        overrides=overrides,
        references=False,
        baseline=f'{base.name}+sgd' if 'topk' in remedy else base.name,
    )
    for base in _BASE[1:3]
    for remedy, overrides in _REMEDIES.items()
)
SCENARIOS = {s.name: s for s in (*_BASE, *_VARIANTS)}
DEFAULT_SCENARIOS = ('equal', 'quarter_cpu', 'latency_20ms', 'worker_lost', 'ps_link_cut')


def apply_overrides(config, overrides) -> object:
    """`config` (a `TrainerConfig`) with each `section.field` of `overrides` replaced.

    Raises:
      ValueError: an override names no section or field of the config.
    """
    for path, value in overrides:
        section_name, _, field = path.partition('.')
        section = getattr(config, section_name, None)
        if section is None or not dataclasses.is_dataclass(section) or not hasattr(section, field):
            raise ValueError(f'override {path!r}: the Trainer config has no such field')
        config = dataclasses.replace(
            config, **{section_name: dataclasses.replace(section, **{field: value})}
        )
    return config
