"""The Evaluator's AUC against TFMA's own functions, bit for bit, on histograms of every shape:
weighted, with examples below 0 and above 1 (the open-ended buckets), one class only, empty."""

import math

import numpy as np
import pytest
from tensorflow_model_analysis.metrics import (
    binary_confusion_matrices,
    calibration_histogram,
    confusion_matrix_metrics,
)

from asynctrain.components.evaluator import metric_states


def _tfma_auc(state):
    """What TFMA's `binary_confusion_matrices` does with a calibration histogram, with its own
    functions: rebin onto the thresholds, derive the matrices, AUC's interpolation."""
    histogram = metric_states.Histogram.buckets(state)
    epsilon = binary_confusion_matrices._EPSILON
    thresholds = binary_confusion_matrices._interpolated_thresholds(
        metric_states.AUC_NUM_THRESHOLDS
    )
    rebinned = calibration_histogram.rebin(
        [t + epsilon if t != 0 else t for t in thresholds], histogram
    )
    matrices = binary_confusion_matrices._histogram_to_binary_confusion_matrices(
        thresholds, rebinned
    )
    return float(
        confusion_matrix_metrics.AUC()._metric_value('ROC', 'interpolation', None, matrices)
    )


def _state(rng, rows, weighted, spread, positives=0.3):
    histogram = metric_states.Histogram()
    labels = (rng.random(rows) < positives).astype(np.float64)
    predictions = np.clip(labels * 0.3 + rng.normal(0.4, spread, rows), -0.2, 1.2)
    weights = rng.gamma(2.0, 1.0, rows) if weighted else None
    histogram.update_state(labels, predictions, weights)
    return histogram.state()


@pytest.mark.parametrize(
    'rows, weighted, spread, positives',
    [
        (3000, False, 0.2, 0.3),
        (3000, True, 0.2, 0.3),
        (50, True, 0.5, 0.5),  # many examples beyond [0, 1]
        (200, False, 0.001, 0.3),  # every prediction in a few buckets
        (100, False, 0.2, 0.0),  # no positive label: NaN, as TFMA
        (1, False, 0.2, 1.0),
    ],
)
def test_auc_is_tfmas_to_the_last_bit(rows, weighted, spread, positives):
    rng = np.random.default_rng(rows)
    state = _state(rng, rows, weighted, spread, positives)
    ours, stock = metric_states.Histogram.auc(state), _tfma_auc(state)
    assert ours == stock or (math.isnan(ours) and math.isnan(stock))


def test_auc_of_an_empty_histogram_is_tfmas():
    state = metric_states.Histogram().state()
    ours, stock = metric_states.Histogram.auc(state), _tfma_auc(state)
    assert ours == stock or (math.isnan(ours) and math.isnan(stock))
