"""What each scheduled train function measures on its worker (`MEASUREMENTS`, one float64
tensor in that order) and how the coordinator adds the closures' measurements up (`Totals`)."""

from __future__ import annotations

import dataclasses
import logging
import math

import tensorflow as tf

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
)


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

    def add(self, result: dict) -> None:
        if not isinstance(result, dict):
            raise TypeError(
                f'closure result: expected the dict train_steps returns, got {result!r}'
            )
        self.steps += int(result['steps'])
        self.loss_sum += float(result['loss_sum'])
        self.staleness_sum += int(result['staleness_sum'])
        self.staleness_max = max(self.staleness_max, int(result['staleness_max']))
        self.input_wait_seconds += float(result['input_wait_seconds'])
        self.seconds += float(result['seconds'])
        self.gradient_bytes_sum += int(result['gradient_bytes_sum'])
        self.dense_gradient_bytes_sum += int(result['dense_gradient_bytes_sum'])

    def add_remote(self, remote_value) -> None:
        """Adds a closure's measurements. Its updates are applied whatever happens here; only
        its measurements are lost if the worker that holds them died since (then the
        measurements cover fewer steps than were trained)."""
        try:
            self.add(dict(zip(MEASUREMENTS, remote_value.fetch().tolist())))
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
