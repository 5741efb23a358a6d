"""The Evaluator's confidence intervals against TFMA's jackknife formula, on states built by hand.

TFMA (`evaluators/jackknife.py`) puts each example of a slice in one of 20 random partitions,
computes every metric on all partitions but one (20 delete-d samples), and reports
`ValueWithTDistribution(sample_mean = mean of the samples, sample_standard_deviation =
std(pseudo-values, ddof=1) / sqrt(20), unsampled_value = the metric on all, 19 degrees of
freedom)`, pseudo-value i being 20 * point - 19 * sample_i. Here the formula is written out
with numpy and compared with `results.evaluate` on states whose partitions are known.
"""

import json

import numpy as np
import pytest
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.api import types as tfma_types
from tensorflow_model_analysis.proto import config_pb2

from asynctrain.components.evaluator import metrics, results

PARTITIONS = 20


def _eval_config(compute_confidence_intervals: bool = True) -> config_pb2.EvalConfig:
    config = config_pb2.EvalConfig(
        model_specs=[config_pb2.ModelSpec(label_key='y')],
        slicing_specs=[config_pb2.SlicingSpec(), config_pb2.SlicingSpec(feature_keys=['city'])],
        metrics_specs=[
            config_pb2.MetricsSpec(
                metrics=[
                    config_pb2.MetricConfig(class_name='ExampleCount'),
                    config_pb2.MetricConfig(
                        class_name='MeanSquaredError', config=json.dumps({'name': 'mse'})
                    ),
                ]
            )
        ],
    )
    config.options.compute_confidence_intervals.value = compute_confidence_intervals
    return tfma.utils.update_eval_config_with_defaults(config)


def test_jackknife_intervals_follow_tfmas_formula():
    eval_config = _eval_config()
    assert results.num_jackknife_partitions(eval_config) == PARTITIONS
    specs = metrics.metric_specs(eval_config)
    rng = np.random.default_rng(3)
    labels, predictions = rng.normal(0, 1, 400), rng.normal(0, 1, 400)
    partition = rng.integers(PARTITIONS, size=400)
    city = np.where(rng.random(400) < 0.5, 'Chicago', 'Evanston')
    states = {}
    for slice_key, rows in [((), np.ones(400, bool)), ((('city', 'Chicago'),), city == 'Chicago')]:
        for p in range(PARTITIONS):
            accumulator = metrics.Accumulator(specs)
            selected = rows & (partition == p)
            accumulator.update(labels[selected], predictions[selected])
            states[(slice_key, p)] = {'': accumulator.state()}

    values = results.evaluate(specs, states, eval_config, PARTITIONS)

    mse = tfma.metrics.MetricKey('mse', example_weighted=False)
    count = tfma.metrics.MetricKey('example_count', example_weighted=False)
    for slice_key, rows in [((), np.ones(400, bool)), ((('city', 'Chicago'),), city == 'Chicago')]:

        def mse_of(mask):
            return np.mean((labels[mask] - predictions[mask]) ** 2)

        point = mse_of(rows)
        samples = np.array([mse_of(rows & (partition != p)) for p in range(PARTITIONS)])
        pseudo = PARTITIONS * point - (PARTITIONS - 1) * samples
        value = values[slice_key][mse]
        assert isinstance(value, tfma_types.ValueWithTDistribution)
        assert value.unsampled_value == pytest.approx(point, rel=1e-9)
        assert value.sample_mean == pytest.approx(samples.mean(), rel=1e-9)
        expected_error = np.std(pseudo, ddof=1) / np.sqrt(PARTITIONS)
        assert value.sample_standard_deviation == pytest.approx(expected_error, rel=1e-9)
        assert value.sample_degrees_of_freedom == PARTITIONS - 1
        # TFMA computes no interval for the example count.
        assert values[slice_key][count] == rows.sum()


def test_without_confidence_intervals_values_are_plain():
    eval_config = _eval_config(compute_confidence_intervals=False)
    assert results.num_jackknife_partitions(eval_config) == 0
    specs = metrics.metric_specs(eval_config)
    accumulator = metrics.Accumulator(specs)
    accumulator.update(np.array([1.0, 2.0]), np.array([1.0, 4.0]))
    values = results.evaluate(specs, {((), 0): {'': accumulator.state()}}, eval_config, 0)
    assert values[()][tfma.metrics.MetricKey('mse', example_weighted=False)] == 2.0
