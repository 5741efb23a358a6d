"""What a worker reports of its gradients for TensorBoard: a sample taken at the last step of
each scheduled execution (`sample`), one float vector laid out as `SampleLayout` says.

The sample holds the global L2 norm, each variable's L2 norm and, when asked, a histogram of each
variable's gradient (`HISTOGRAM_BUCKETS` equal buckets between its smallest and largest entry). An
embedding's gradient comes as rows (`IndexedSlices`): rows named more than once in a batch are
summed first, so its norm is the dense gradient's, and its histogram covers the rows the batch
touched (the untouched rows' zeros are left out). A variable without a gradient reports zeros.

Sampling one step per execution keeps the cost off the other steps: the sample is computed under
a `tf.cond` on that step only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import tensorflow as tf

HISTOGRAM_BUCKETS = 30


@dataclasses.dataclass(frozen=True)
class SampleLayout:
    """Where each figure lies in a sample vector.

    Attributes:
      variables: The trainable variables' names, in the model's order.
      histograms: Whether each variable's histogram follows the norms.
    """

    variables: tuple[str, ...]
    histograms: bool

    @property
    def size(self) -> int:
        per_histogram = 2 + HISTOGRAM_BUCKETS if self.histograms else 0
        return 1 + len(self.variables) * (1 + per_histogram)

    def split(self, sample: Sequence[float]) -> dict:
        """`sample` as `{'global_norm', 'norms': {name: norm}, 'histograms': {name: (low, high,
        counts)}}` (histograms empty unless the layout has them)."""
        if len(sample) != self.size:
            raise ValueError(f'gradient sample: expected {self.size} values, got {len(sample)}')
        n = len(self.variables)
        norms = dict(zip(self.variables, (float(x) for x in sample[1 : 1 + n])))
        histograms = {}
        if self.histograms:
            width = 2 + HISTOGRAM_BUCKETS
            for i, name in enumerate(self.variables):
                block = sample[1 + n + i * width : 1 + n + (i + 1) * width]
                histograms[name] = (
                    float(block[0]),
                    float(block[1]),
                    [int(c) for c in block[2:]],
                )
        return {'global_norm': float(sample[0]), 'norms': norms, 'histograms': histograms}


def layout_for(variables, histograms: bool) -> SampleLayout:
    """The layout of `sample(..., variables, histograms)`'s result."""
    return SampleLayout(tuple(_name(v) for v in variables), histograms)


def _name(variable) -> str:
    name = variable.name
    return name[: -len(':0')] if name.endswith(':0') else name


def _entries(gradient) -> tf.Tensor:
    """The gradient's entries as a flat float64 vector (an embedding's touched rows, summed by
    row)."""
    if isinstance(gradient, tf.IndexedSlices):
        rows, position = tf.unique(gradient.indices)
        values = tf.math.unsorted_segment_sum(gradient.values, position, tf.size(rows))
        return tf.reshape(tf.cast(values, tf.float64), [-1])
    return tf.reshape(tf.cast(gradient, tf.float64), [-1])


def _histogram(entries: tf.Tensor) -> tf.Tensor:
    """[low, high, count per bucket] of non-empty `entries` (all in the first bucket when they
    are equal)."""
    low, high = tf.reduce_min(entries), tf.reduce_max(entries)
    # A zero-width range: widen it so `histogram_fixed_width` has buckets to fill.
    upper = tf.where(high > low, high, low + 1.0)
    counts = tf.histogram_fixed_width(entries, tf.stack([low, upper]), nbins=HISTOGRAM_BUCKETS)
    return tf.concat([tf.stack([low, high]), tf.cast(counts, tf.float64)], axis=0)


def sample(gradients: Sequence, histograms: bool) -> tf.Tensor:
    """One step's sample of `gradients` (one per trainable variable, at least one; None for
    none): float64, laid out as `layout_for(variables, histograms)`."""
    entries = [None if g is None else _entries(g) for g in gradients]
    norms = [tf.constant(0.0, tf.float64) if e is None else tf.norm(e, ord=2) for e in entries]
    global_norm = tf.sqrt(tf.add_n([tf.square(n) for n in norms]))
    parts = [tf.reshape(global_norm, [1]), tf.stack(norms)]
    if histograms:
        for e in entries:
            parts.append(_no_histogram() if e is None else _histogram_of_any_size(e))
    return tf.concat(parts, axis=0)


def _histogram_of_any_size(entries: tf.Tensor) -> tf.Tensor:
    # An embedding's touched rows are known only at run time (possibly none).
    return tf.cond(
        tf.size(entries) > 0,
        lambda: _histogram(entries),
        _no_histogram,
    )


def _no_histogram() -> tf.Tensor:
    return tf.zeros([2 + HISTOGRAM_BUCKETS], tf.float64)
