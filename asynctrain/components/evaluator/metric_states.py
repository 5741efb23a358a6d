"""The states the Evaluator's metrics add up, in NumPy, and the values TFMA derives from them.

Each is what a tf-keras or TFMA metric would keep, as arrays that add: `Mean` (a Keras mean
metric's [total, count]: accuracies and squared errors), `Count` (the example count), `Histogram`
(TFMA's calibration histogram, sparse, from which AUC and the calibration and confusion-matrix
plots derive) and `ClassMatrix` (TFMA's multi-class confusion matrix). Plain NumPy, not Keras
metric objects: Keras variables belong to TensorFlow's global eager context, which a
ParameterServerStrategy earlier in the same process connects to its cluster.
"""

from __future__ import annotations

import numpy as np
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.metrics import (
    binary_confusion_matrices,
    calibration_histogram,
    confusion_matrix_metrics,
    multi_class_confusion_matrix_metrics,
)

# TFMA's default number of thresholds for AUC (binary_confusion_matrices.DEFAULT_NUM_THRESHOLDS).
AUC_NUM_THRESHOLDS = 10_000


class Mean:
    """A Keras mean metric's state in NumPy: [total, count], as `tf.keras.metrics.Mean` keeps it
    (`total += sum(values * weight)`, `count += sum(weight)`, or the number of values without a
    weight), with each class's per-example values as tf_keras computes them in float64.

    Plain NumPy, not Keras metric objects: Keras variables belong to TensorFlow's global eager
    context, which a ParameterServerStrategy earlier in the same process connects to its cluster;
    states that are arrays add up the same wherever they are made."""

    def __init__(self, class_name: str):
        self.class_name = class_name
        self.variables = [np.zeros((), np.float64), np.zeros((), np.float64)]

    def _values(self, labels: np.ndarray, predictions: np.ndarray) -> np.ndarray:
        if self.class_name == 'BinaryAccuracy':
            # tf_keras `binary_accuracy`: predictions above 0.5 are 1, averaged over the last axis.
            return np.mean(labels == (predictions > 0.5).astype(np.float64), axis=-1)
        if self.class_name == 'SparseCategoricalAccuracy':
            # tf_keras `sparse_categorical_matches`: the arg max against the class id.
            return (labels == np.argmax(predictions, axis=-1).astype(labels.dtype)).astype(
                np.float64
            )
        squared = np.square(predictions - labels)
        # MeanSquaredError averages the last axis first; RootMeanSquaredError keeps each element.
        return np.mean(squared, axis=-1) if self.class_name == 'MeanSquaredError' else squared

    def update_state(self, labels, predictions, sample_weight=None) -> None:
        values = self._values(np.asarray(labels, np.float64), np.asarray(predictions, np.float64))
        if sample_weight is None:
            self.variables[0] += values.sum()
            self.variables[1] += values.size
            return
        weight = np.broadcast_to(
            np.asarray(sample_weight, np.float64).reshape(
                values.shape[0], *([1] * (values.ndim - 1))
            ),
            values.shape,
        )
        self.variables[0] += (values * weight).sum()
        self.variables[1] += weight.sum()

    def state(self) -> list[np.ndarray]:
        return [v.copy() for v in self.variables]

    @staticmethod
    def result(class_name: str, state: list[np.ndarray]) -> float:
        total, count = (float(v) for v in state)
        mean = total / count if count else 0.0  # tf.math.divide_no_nan, as Keras divides
        return float(np.sqrt(mean)) if class_name == 'RootMeanSquaredError' else mean


class Count:
    """The example count (`tf.keras.metrics.Sum`): [total]."""

    def __init__(self):
        self.variables = [np.zeros((), np.float64)]

    def update_state(self, count: float) -> None:
        self.variables[0] += count

    def state(self) -> list[np.ndarray]:
        return [v.copy() for v in self.variables]


# TFMA's calibration histogram (`calibration_histogram.py`): buckets 1..N of width 1/N over
# [0, 1], bucket 0 below and N + 1 above.
_HISTOGRAM_BUCKETS = calibration_histogram.DEFAULT_NUM_BUCKETS


def histogram_buckets(predictions: np.ndarray) -> np.ndarray:
    """TFMA's `_bucket_index` of each prediction, vectorized (the same float64 arithmetic)."""
    index = (predictions.astype(np.float64) - 0.0) / 1.0 * _HISTOGRAM_BUCKETS + 1
    return np.where(
        index < 0, 0, np.where(index >= _HISTOGRAM_BUCKETS + 1, _HISTOGRAM_BUCKETS + 1, index)
    ).astype(np.int64)


class HistogramState:
    """A calibration histogram's sums (weighted labels, predictions, examples) for the buckets
    that examples reached, sorted by bucket: a slice of a few examples holds a few buckets, not
    TFMA's 10,002. States of slices times jackknife partitions are what the evaluation carries
    from worker to worker, so their size is the evaluation's memory and shuffle."""

    __slots__ = ('ids', 'sums')

    def __init__(self, ids: np.ndarray, sums: np.ndarray):
        self.ids = ids  # int64 bucket ids, sorted, unique
        self.sums = sums  # [3, len(ids)] float64

    @classmethod
    def of(cls, buckets: np.ndarray, columns: tuple[np.ndarray, ...]) -> HistogramState:
        ids, inverse = np.unique(buckets, return_inverse=True)
        return cls(ids, np.stack([np.bincount(inverse, c, minlength=ids.size) for c in columns]))

    def __add__(self, other: HistogramState) -> HistogramState:
        return HistogramState.of(
            np.concatenate([self.ids, other.ids]),
            tuple(np.concatenate([self.sums, other.sums], axis=1)),
        )


class Histogram:
    """An AUC as TFMA computes it, from [sum of labels, of predictions, of examples] per bucket."""

    def __init__(self):
        self._state = HistogramState(np.zeros(0, np.int64), np.zeros((3, 0)))

    def update_state(
        self, labels: np.ndarray, predictions: np.ndarray, sample_weight: np.ndarray | None = None
    ) -> None:
        labels, predictions = labels.reshape(-1), predictions.reshape(-1)
        weight = np.ones_like(predictions) if sample_weight is None else sample_weight.reshape(-1)
        batch = HistogramState.of(
            histogram_buckets(predictions), (labels * weight, predictions * weight, weight)
        )
        self._state = self._state + batch

    def state(self) -> list[HistogramState]:
        return [self._state]

    @staticmethod
    def buckets(state: list[HistogramState]) -> list:
        """TFMA's `Histogram`: its non-empty buckets, in order."""
        (histogram,) = state
        labels, predictions, examples = histogram.sums
        return [
            calibration_histogram.Bucket(int(histogram.ids[i]), labels[i], predictions[i], w)
            for i, w in enumerate(examples)
            if w != 0
        ]

    @staticmethod
    def plot(plot: tfma.metrics.Metric, example_weighted: bool, state: list[HistogramState]):
        """The proto of `plot` (an instance of one of TFMA's plot classes), by TFMA's own
        computations of it from the histogram: the plot class's first computation is the
        histogram, every later one derives from those before."""
        computations = plot.computations(example_weighted=example_weighted)
        first, derived = computations[0], computations[1:]
        if not isinstance(
            first.combiner, calibration_histogram._CalibrationHistogramCombiner
        ) or any(  # pylint: disable=protected-access
            not isinstance(c, tfma.metrics.DerivedMetricComputation) for c in derived
        ):
            raise ValueError(
                f'{type(plot).__name__}: TFMA computes it otherwise than from a histogram'
            )
        values = {first.keys[0]: Histogram.buckets(state)}
        for computation in derived:
            values.update(computation.result(values))
        return values[computations[-1].keys[-1]]

    @staticmethod
    def one_class(state: list[HistogramState]) -> bool:
        """Whether the examples (by weight) are all positive or all negative, or none: AUC is then
        undefined, where TFMA's interpolation gives 0."""
        (histogram,) = state
        labels, _, examples = histogram.sums.sum(axis=1)
        return not (labels > 0.0 and examples - labels > 0.0)

    @staticmethod
    def auc(state: list[HistogramState]) -> float:
        """TFMA's AUC of the histogram: `rebin` onto its thresholds (with their epsilon fences),
        `_histogram_to_binary_confusion_matrices`, then AUC's interpolation, TFMA's own function.
        The first two are TFMA's Python loops written as NumPy, the same additions in the same
        order (a sequential `bincount` and `cumsum`), so the value is TFMA's to the last bit
        (`tests/components/evaluator/metric_states_test.py`); TFMA's loops took 70 ms per AUC, which
        a jackknife multiplies by 21 per slice."""
        labels, examples = rebinned_histogram(state)
        negatives = examples - labels
        # tp(i), fp(i): labels at or above threshold i; fn(i), tn(i): below it.
        tp = np.cumsum(labels[::-1])[::-1]
        fp = np.cumsum(negatives[::-1])[::-1]
        fn = np.concatenate([[0.0], np.cumsum(labels)[:-1]])
        tn = np.concatenate([[0.0], np.cumsum(negatives)[:-1]])
        # Above 1 + epsilon nothing is predicted positive (TFMA's last threshold).
        above = _AUC_THRESHOLDS >= 1.0 + binary_confusion_matrices._EPSILON  # pylint: disable=protected-access
        fn = np.where(above, tp[0], fn)
        tn = np.where(above, fp[0], tn)
        tp = np.where(above, 0.0, tp)
        fp = np.where(above, 0.0, fp)
        matrices = binary_confusion_matrices.Matrices(
            _AUC_THRESHOLDS.tolist(), tp.tolist(), tn.tolist(), fp.tolist(), fn.tolist()
        )
        return float(
            confusion_matrix_metrics.AUC()._metric_value(  # pylint: disable=protected-access
                'ROC', 'interpolation', None, matrices
            )
        )


# TFMA's AUC thresholds (`_interpolated_thresholds`) and the ones it rebins the histogram onto:
# each but 0 moved up by its epsilon.
_AUC_THRESHOLDS = np.array(
    binary_confusion_matrices._interpolated_thresholds(AUC_NUM_THRESHOLDS)  # pylint: disable=protected-access
)
_REBIN_THRESHOLDS = np.array(
    [t + binary_confusion_matrices._EPSILON if t != 0 else t for t in _AUC_THRESHOLDS]  # pylint: disable=protected-access
)


def rebinned_histogram(state: list[HistogramState]) -> tuple[np.ndarray, np.ndarray]:
    """(weighted labels, weighted examples) per AUC threshold: TFMA's `calibration_histogram.rebin`
    of the non-empty buckets. A bucket's prediction is its left edge (-inf and +inf for the two
    open ends), and it lands in the last threshold at or below it (the first one at least)."""
    (histogram,) = state
    labels, _, examples = histogram.sums
    present = examples != 0
    buckets, labels, examples = histogram.ids[present], labels[present], examples[present]
    left = (buckets - 1) / _HISTOGRAM_BUCKETS * (1.0 - 0.0) + 0.0
    left = np.where(buckets == 0, -np.inf, left)
    left = np.where(buckets >= _HISTOGRAM_BUCKETS + 1, np.inf, left)
    target = np.searchsorted(_REBIN_THRESHOLDS[1:], left, side='right')
    size = len(_REBIN_THRESHOLDS)
    return (
        np.bincount(target, weights=labels, minlength=size),
        np.bincount(target, weights=examples, minlength=size),
    )


class ClassMatrix:
    """TFMA's multi-class confusion matrix at its default threshold 0.0: [weight, examples] per
    (actual class id, predicted class id), ids offset by one so that -1 (TFMA's "no prediction",
    when the top probability is <= the threshold) is index 0."""

    THRESHOLD = 0.0

    def __init__(self):
        self.variables: list[np.ndarray] = []

    def update_state(self, labels, predictions, sample_weight=None) -> None:
        labels = np.asarray(labels).astype(np.int64)
        classes = predictions.shape[1]
        if not self.variables:
            self.variables = [np.zeros((classes + 1, classes + 1)) for _ in range(2)]
        if labels.size and (labels.min() < -1 or labels.max() >= classes):
            raise ValueError(
                f'MultiClassConfusionMatrixPlot: class ids {labels.min()}..{labels.max()} '
                f'outside the {classes} classes of the predictions'
            )
        predicted = np.argmax(predictions, axis=1)
        top = predictions[np.arange(labels.size), predicted]
        predicted = np.where(top <= self.THRESHOLD, -1, predicted)
        weight = np.ones(labels.size) if sample_weight is None else sample_weight
        for variable, values in zip(self.variables, (weight, np.ones(labels.size))):
            np.add.at(variable, (labels + 1, predicted + 1), values)

    def state(self) -> list[np.ndarray]:
        return [v.copy() for v in self.variables]

    @staticmethod
    def plot(state: list[np.ndarray]):
        """TFMA's `Matrices(...).to_proto()` of the entries that examples reached (none when no
        example reached the state: a bootstrap sample that drew none of a slice's)."""
        weights, seen = state or (np.zeros((1, 1)), np.zeros((1, 1)))
        entries = {
            multi_class_confusion_matrix_metrics.MatrixEntryKey(int(a) - 1, int(p) - 1): float(
                weights[a, p]
            )
            for a, p in zip(*np.nonzero(seen))
        }
        matrices = multi_class_confusion_matrix_metrics.Matrices({ClassMatrix.THRESHOLD: entries})
        return matrices.to_proto().multi_class_confusion_matrix_at_thresholds
