"""The training summaries TensorBoard shows, written by the coordinator once per summary
interval from the closures' `measurements.Totals` (`write_interval`).

Scalars (`train/...`): loss, examples/s, staleness mean and max, input-wait fraction, gradient
bytes per step, each worker's steps/s (`train/worker_steps_per_sec/worker_N`, its steps in the
interval over the interval's wall time: a slow or lost host shows as its own line), and the
sampled gradient norms (`train/gradient_norm/global` and one per variable). Histograms: the
interval's steps by staleness (`train/staleness`, one bucket per value, the last holding that
value or more), and each variable's latest sampled gradient (`gradients/NAME`), both written as
TensorBoard's histogram plugin stores its own (`tensorboard/plugins/histogram/summary_v2.py`:
a [k, 3] tensor of bucket left edge, right edge and count, under the plugin's metadata).
"""

from __future__ import annotations

import tensorflow as tf
from tensorboard.plugins.histogram import metadata as histogram_metadata

from asynctrain.components.trainer.training import measurements


def write_histogram(tag: str, edges: list[float], counts: list[int], description: str) -> None:
    """Writes bucket `i` as [edges[i], edges[i + 1]) holding `counts[i]`, at the default
    writer's step."""
    if len(edges) != len(counts) + 1:
        raise ValueError(f'{tag}: {len(counts)} buckets need {len(counts) + 1} edges')
    buckets = tf.constant(
        [[edges[i], edges[i + 1], float(c)] for i, c in enumerate(counts)], tf.float64
    )
    tf.summary.write(
        tag,
        buckets,
        metadata=histogram_metadata.create_summary_metadata(
            display_name=tag, description=description
        ),
    )


def staleness_edges() -> list[float]:
    return [float(i) for i in range(measurements.STALENESS_BINS + 1)]


def gradient_edges(low: float, high: float, buckets: int) -> list[float]:
    """The equal buckets `gradient_statistics` counted in (one unit wide from `low` when all
    entries were equal)."""
    upper = high if high > low else low + 1.0
    width = (upper - low) / buckets
    return [low + i * width for i in range(buckets)] + [upper]


def write_interval(
    writer: tf.summary.SummaryWriter,
    step: int,
    totals: measurements.Totals,
    examples_per_sec: float,
    interval_seconds: float,
) -> None:
    """One interval's summaries at `step`."""
    with writer.as_default(step=step):
        tf.summary.scalar('train/loss', totals.loss_mean)
        tf.summary.scalar('train/examples_per_sec', examples_per_sec)
        tf.summary.scalar('train/staleness_mean', totals.staleness_mean)
        tf.summary.scalar('train/staleness_max', totals.staleness_max)
        tf.summary.scalar('train/input_wait_fraction', totals.input_wait_fraction)
        tf.summary.scalar('train/gradient_bytes_per_step', totals.gradient_bytes_per_step)
        for worker, steps in sorted(totals.worker_steps.items()):
            tf.summary.scalar(
                f'train/worker_steps_per_sec/worker_{worker}',
                steps / max(interval_seconds, 1e-9),
            )
        write_histogram(
            'train/staleness',
            staleness_edges(),
            totals.staleness_counts,
            'Steps by staleness: updates applied by other workers between a step reading the '
            'weights and applying its own (last bucket: that many or more).',
        )
        for name, norm in totals.gradient_norm_means.items():
            tf.summary.scalar(f'train/gradient_norm/{name}', norm)
        for name, (low, high, counts) in totals.gradient_histograms.items():
            write_histogram(
                f'gradients/{name}',
                gradient_edges(low, high, len(counts)),
                counts,
                "The latest sampled step's gradient entries (an embedding's touched rows).",
            )
