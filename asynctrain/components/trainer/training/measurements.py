"""What each scheduled train function measures on its worker and how the coordinator adds the
closures' measurements up (`Totals`).

A train function returns one float64 vector: the `MEASUREMENTS` in order, then the count of its
steps at each staleness (`STALENESS_BINS`), then its last step's gradient sample
(`gradient_statistics.SampleLayout`); `split` reads it back."""

from __future__ import annotations

import collections
import dataclasses
import logging
import math

import tensorflow as tf

from asynctrain.components.trainer.training import gradient_statistics

# What a train function's result holds, in order (float64, counts exact below 2**53).
MEASUREMENTS = (
    'steps',
    'loss_sum',
    'staleness_sum',
    'staleness_max',
    'input_wait_seconds',
    'seconds',
    'gradient_bytes_sum',
    'dense_gradient_bytes_sum',
    'worker',
)
# Steps counted by staleness: 0, 1, ..., STALENESS_BINS - 2 each, and that or more in the last.
STALENESS_BINS = 32


def split(vector, sample_layout: gradient_statistics.SampleLayout) -> dict:
    """A train function's result vector as a dict: each of `MEASUREMENTS`,
    `staleness_counts` and `gradient_sample` (`SampleLayout.split`'s dict)."""
    values = list(vector)
    n = len(MEASUREMENTS)
    expected = n + STALENESS_BINS + sample_layout.size
    if len(values) != expected:
        raise ValueError(f'closure result: expected {expected} values, got {len(values)}')
    result = dict(zip(MEASUREMENTS, values[:n]))
    result['staleness_counts'] = [int(c) for c in values[n : n + STALENESS_BINS]]
    result['gradient_sample'] = sample_layout.split(values[n + STALENESS_BINS :])
    return result


@dataclasses.dataclass
class Totals:
    """Sums over closures' measurements; the means the report and the summaries give."""

    steps: int = 0
    loss_sum: float = 0.0
    staleness_sum: int = 0
    staleness_max: int = 0
    input_wait_seconds: float = 0.0
    seconds: float = 0.0
    gradient_bytes_sum: int = 0
    dense_gradient_bytes_sum: int = 0
    # Steps by the worker that ran them (its task index).
    worker_steps: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    staleness_counts: list[int] = dataclasses.field(default_factory=lambda: [0] * STALENESS_BINS)
    # Gradient samples (one per closure): their count, their norms' sums, the latest histograms.
    gradient_samples: int = 0
    global_gradient_norm_sum: float = 0.0
    gradient_norm_sums: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    gradient_histograms: dict[str, tuple] = dataclasses.field(default_factory=dict)

    @classmethod
    def of_closure(cls, result: dict) -> Totals:
        """One closure's measurements (`split`'s dict) as totals."""
        if not isinstance(result, dict):
            raise TypeError(
                f'closure result: expected the dict train_steps returns, got {result!r}'
            )
        steps = int(result['steps'])
        totals = cls(
            steps=steps,
            loss_sum=float(result['loss_sum']),
            staleness_sum=int(result['staleness_sum']),
            staleness_max=int(result['staleness_max']),
            input_wait_seconds=float(result['input_wait_seconds']),
            seconds=float(result['seconds']),
            gradient_bytes_sum=int(result['gradient_bytes_sum']),
            dense_gradient_bytes_sum=int(result['dense_gradient_bytes_sum']),
        )
        if steps:  # an execution of no steps (a warm-up) ran on no worker's behalf, sampled none
            sample = result['gradient_sample']
            totals.worker_steps[int(result['worker'])] = steps
            totals.staleness_counts = [int(c) for c in result['staleness_counts']]
            totals.gradient_samples = 1
            totals.global_gradient_norm_sum = sample['global_norm']
            totals.gradient_norm_sums.update(sample['norms'])
            totals.gradient_histograms = dict(sample['histograms'])
        return totals

    def add(self, result: dict) -> None:
        """Adds one closure's measurements (`split`'s dict)."""
        self.merge(Totals.of_closure(result))

    def add_remote(self, remote_value, sample_layout: gradient_statistics.SampleLayout) -> None:
        """Adds a closure's measurements. Its updates are applied whatever happens here; only
        its measurements are lost if the worker that holds them died since (then the
        measurements cover fewer steps than were trained)."""
        try:
            self.add(split(remote_value.fetch().tolist(), sample_layout))
        except (tf.errors.UnavailableError, tf.errors.CancelledError) as e:
            logging.warning(
                'Measurements of one execution lost with its worker: %s', str(e).splitlines()[0]
            )

    def merge(self, other: Totals) -> None:
        self.steps += other.steps
        self.loss_sum += other.loss_sum
        self.staleness_sum += other.staleness_sum
        self.staleness_max = max(self.staleness_max, other.staleness_max)
        self.input_wait_seconds += other.input_wait_seconds
        self.seconds += other.seconds
        self.gradient_bytes_sum += other.gradient_bytes_sum
        self.dense_gradient_bytes_sum += other.dense_gradient_bytes_sum
        self.worker_steps.update(other.worker_steps)  # a Counter's update adds
        self.staleness_counts = [
            a + b for a, b in zip(self.staleness_counts, other.staleness_counts)
        ]
        self.gradient_samples += other.gradient_samples
        self.global_gradient_norm_sum += other.global_gradient_norm_sum
        self.gradient_norm_sums.update(other.gradient_norm_sums)
        self.gradient_histograms.update(other.gradient_histograms)

    @property
    def loss_mean(self) -> float:
        return self.loss_sum / self.steps if self.steps else math.nan

    @property
    def staleness_mean(self) -> float:
        return self.staleness_sum / self.steps if self.steps else 0.0

    @property
    def gradient_bytes_per_step(self) -> float:
        return self.gradient_bytes_sum / self.steps if self.steps else 0.0

    @property
    def dense_gradient_bytes_per_step(self) -> float:
        return self.dense_gradient_bytes_sum / self.steps if self.steps else 0.0

    @property
    def input_wait_fraction(self) -> float:
        return self.input_wait_seconds / self.seconds if self.seconds else 0.0

    @property
    def gradient_norm_means(self) -> dict[str, float]:
        """Each variable's mean gradient norm over the samples, and the global one (`global`)."""
        if not self.gradient_samples:
            return {}
        means = {name: s / self.gradient_samples for name, s in self.gradient_norm_sums.items()}
        return {'global': self.global_gradient_norm_sum / self.gradient_samples, **means}
