"""The named scenarios of `asynctrain bench async`: how the emulated hosts differ (CPU budgets,
links, a lost worker, a cut parameter-server link) and which Trainer config overrides a variant
adds (so stale-gradient remedies join as variants without changing the bench).

A lost worker (SIGKILLed at 30% of the run, back 20 s later) and a parameter-server link cut for
10 s are the next scenarios; `EmulatedCluster` already does both (`Host.kill`, `restart`,
`Link.cut_for`).
"""

from __future__ import annotations

import dataclasses

# A full host's CPU budget; a slow host gets a quarter of it.
FULL_CPUS = 1.0


@dataclasses.dataclass(frozen=True)
class Scenario:
    """One variant of the bench.

    Attributes:
      name: how the report names it.
      slow_worker_cpus: the last worker's CPU budget as a share of the others' (1.0: equal).
      worker_latency_ms: latency, with as much jitter, on the last worker's link (0: none).
      overrides: Trainer config overrides, `(section.field, value)` pairs.
    """

    name: str
    slow_worker_cpus: float = 1.0
    worker_latency_ms: float = 0.0
    overrides: tuple[tuple[str, object], ...] = ()

    def worker_cpus(self, num_workers: int) -> list[float]:
        """Each worker's CPU budget, the last one's scaled by `slow_worker_cpus`."""
        return [FULL_CPUS] * (num_workers - 1) + [FULL_CPUS * self.slow_worker_cpus]


SCENARIOS = {
    s.name: s
    for s in (
        Scenario('equal'),
        Scenario('quarter_cpu', slow_worker_cpus=0.25),
        Scenario('latency_20ms', worker_latency_ms=20.0),
    )
}
DEFAULT_SCENARIOS = ('equal', 'quarter_cpu')


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
