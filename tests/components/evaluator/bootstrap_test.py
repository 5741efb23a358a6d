"""The Evaluator's Poisson bootstrap against the examples it replicates and TFMA's interval.

TFMA (`evaluators/poisson_bootstrap.py`) adds each (slice, example) to each of 20 samples as many
times as a Poisson(1) draw says, computes every metric on each sample and reports
`ValueWithTDistribution(sample_mean, sample_standard_deviation = std(samples, ddof=1),
unsampled_value = the metric on all examples, 19 degrees of freedom)`; its writer turns that into
mean -/+ t(0.975, 19) * standard deviation. Here batches go through `resampling.bootstrap` and
`Accumulator.update` as the scoring DoFn sends them, and every sample's metrics are compared with
the same metrics computed on the examples replicated by their draws (our path without
multiplicities, and NumPy), then the interval TFMA's loader reads back with the formula.
"""

import hashlib
import json

import numpy as np
import pytest
import tensorflow_model_analysis as tfma
from scipy import stats
from tensorflow_model_analysis import constants as tfma_constants
from tensorflow_model_analysis.api import types as tfma_types
from tensorflow_model_analysis.proto import config_pb2
from tensorflow_model_analysis.slicer import slicer_lib
from tensorflow_model_analysis.writers import metrics_plots_and_validations_writer as tfma_writer

from asynctrain.components.evaluator import checks, metric_states, metrics, resampling, results

SAMPLES = 20
ROWS, BATCH = 900, 300
CITY = (('city', 'Chicago'),)


def _eval_config() -> config_pb2.EvalConfig:
    config = config_pb2.EvalConfig(
        model_specs=[config_pb2.ModelSpec(label_key='y', example_weight_key='w')],
        slicing_specs=[config_pb2.SlicingSpec(), config_pb2.SlicingSpec(feature_keys=['city'])],
        metrics_specs=[
            config_pb2.MetricsSpec(
                metrics=[
                    config_pb2.MetricConfig(class_name='ExampleCount'),
                    *(
                        config_pb2.MetricConfig(
                            class_name=class_name, config=json.dumps({'name': name})
                        )
                        for class_name, name in [
                            ('AUC', 'auc'),
                            ('BinaryAccuracy', 'accuracy'),
                            ('MeanSquaredError', 'mse'),
                        ]
                    ),
                ],
                example_weights=config_pb2.ExampleWeightOptions(weighted=True, unweighted=True),
            )
        ],
    )
    config.options.compute_confidence_intervals.value = True
    config.options.confidence_intervals.method = (
        config_pb2.ConfidenceIntervalOptions.POISSON_BOOTSTRAP
    )
    return tfma.utils.update_eval_config_with_defaults(config)


def _examples():
    rng = np.random.default_rng(7)
    predictions = rng.random(ROWS)
    labels = (rng.random(ROWS) < predictions).astype(np.int64)
    weights = rng.uniform(0.5, 2.0, ROWS)
    chicago = rng.random(ROWS) < 0.4
    return labels, predictions, weights, chicago


def _serialized(rows):
    """Stand-ins for the serialized examples: distinct bytes per row."""
    return [f'example {i}'.encode() for i in rows]


def _bootstrap_states(specs, labels, predictions, weights, chicago, batch_size=BATCH, order=None):
    """{(slice key, sample): {'': State}} batch by batch as the scoring DoFn accumulates them
    (the examples in `order`, `batch_size` at a time), and {(slice key, sample): each example's
    multiplicity} over all examples."""
    order = np.arange(ROWS) if order is None else order
    accumulators, times_of = {}, {}
    for start in range(0, ROWS, batch_size):
        batch = order[start : start + batch_size]
        keys = resampling.example_keys(_serialized(batch))
        rows_by_slice = {(): batch.size, CITY: np.flatnonzero(chicago[batch])}
        for slice_key, rows in rows_by_slice.items():
            for sample, part, times in resampling.bootstrap(rows, keys, slice_key, SAMPLES):
                key = (slice_key, sample)
                accumulator = accumulators.setdefault(key, metrics.Accumulator(specs))
                counted = times_of.setdefault(key, np.zeros(ROWS, np.int64))
                part = np.arange(batch.size) if part is None else part
                counted[batch[part]] += 1 if times is None else times
                if part.size:
                    accumulator.update(
                        labels[batch][part], predictions[batch][part], weights[batch][part], times
                    )
    return {key: {'': a.state()} for key, a in accumulators.items()}, times_of


def _numpy_metrics(labels, predictions, weights, times):
    """mse, accuracy and the count, unweighted and weighted, of the replicated examples."""
    rows = np.repeat(np.arange(ROWS), times)
    squared = (labels[rows] - predictions[rows]) ** 2
    correct = labels[rows] == (predictions[rows] > 0.5)
    out = {}
    for weighted, weight in ((False, np.ones(rows.size)), (True, weights[rows])):
        out[('mse', weighted)] = np.sum(squared * weight) / np.sum(weight)
        out[('accuracy', weighted)] = np.sum(correct * weight) / np.sum(weight)
        out[('example_count', weighted)] = np.sum(weight)
    return out


def test_each_sample_is_the_metrics_of_the_replicated_examples():
    eval_config = _eval_config()
    assert results.num_bootstrap_samples(eval_config) == SAMPLES
    assert results.num_jackknife_partitions(eval_config) == 0
    specs = metrics.metric_specs(eval_config)
    labels, predictions, weights, chicago = _examples()
    states, times_of = _bootstrap_states(specs, labels, predictions, weights, chicago)
    assert len(states) == 2 * (SAMPLES + 1)
    # Each (slice, example) draws on its own: the same example's multiplicities differ between
    # the slices, and between the samples.
    overall, city = times_of[((), 0)], times_of[(CITY, 0)]
    assert np.any((overall != city)[chicago])
    assert not np.any(city[~chicago])
    assert np.any(times_of[((), 0)] != times_of[((), 1)])
    assert times_of[((), resampling.FULL_SAMPLE)].tolist() == [1] * ROWS
    # Poisson(1): over 18,000 draws the mean and variance are 1 within 7 standard errors.
    draws = np.stack([times_of[((), s)] for s in range(SAMPLES)])
    assert abs(draws.mean() - 1) < 0.05 and abs(draws.var() - 1) < 0.1
    # Metrics but AUC (whose value costs TFMA's 10,000 thresholds; its state is compared below).
    cheap = tuple(spec for spec in specs if spec.class_name != 'AUC')
    for (slice_key, sample), state in states.items():
        where = (slice_key, sample)
        times = times_of[where]
        replicated = np.repeat(np.arange(ROWS), times)
        # Our path without multiplicities, on the replicated examples: the same state, every
        # histogram bucket and sum.
        plain = metrics.Accumulator(specs)
        plain.update(labels[replicated], predictions[replicated], weights[replicated])
        expected = plain.state()
        assert sorted(state['']) == sorted(expected), where
        for name, variables in expected.items():
            for got, want in zip(state[''][name], variables):
                if isinstance(want, metric_states.HistogramState):  # the buckets examples reached
                    assert got.ids.tolist() == want.ids.tolist(), (where, name)
                    got, want = got.sums, want.sums
                np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=str((where, name)))
        values = metrics.metric_values(cheap, state[''])
        for spec, value in _numpy_metrics(labels, predictions, weights, times).items():
            (metric,) = [s for s in cheap if (s.name, s.example_weighted) == spec]
            assert values[metric] == pytest.approx(value, rel=1e-9), (where, spec)
    for where in (((), 0), (CITY, 0)):
        replicated = np.repeat(np.arange(ROWS), times_of[where])
        plain = metrics.Accumulator(specs)
        plain.update(labels[replicated], predictions[replicated], weights[replicated])
        got = metrics.metric_values(specs, states[where][''])
        assert got == pytest.approx(metrics.metric_values(specs, plain.state()), rel=1e-9)


def test_intervals_are_tfmas_t_distribution_of_the_samples(tmp_path):
    eval_config = _eval_config()
    specs = metrics.metric_specs(eval_config)
    labels, predictions, weights, chicago = _examples()
    states, _ = _bootstrap_states(specs, labels, predictions, weights, chicago)

    values = results.evaluate(specs, states, eval_config, 0, SAMPLES)
    results.write_evaluation(
        str(tmp_path), eval_config, values, checks.validate(values, eval_config), {'': 'm'}, 'd'
    )

    written = {
        (_slice_key(record), tfma.metrics.MetricKey.from_proto(kv.key)): kv
        for record in tfma_writer.load_and_deserialize_metrics(str(tmp_path))
        for kv in record.metric_keys_and_values
    }
    # TFMA's loader (unweighted metrics under their names) reads the same bounds.
    loaded = {key: m[''][''] for key, m in tfma.load_eval_result(str(tmp_path)).slicing_metrics}
    t = stats.t.ppf(0.975, SAMPLES - 1)
    for slice_key in ((), CITY):
        point = metrics.metric_values(specs, states[(slice_key, resampling.FULL_SAMPLE)][''])
        per_sample = [
            metrics.metric_values(specs, states[(slice_key, s)]['']) for s in range(SAMPLES)
        ]
        for spec in specs:
            key = tfma.metrics.MetricKey(spec.name, example_weighted=spec.example_weighted)
            value, record = values[slice_key][key], written[(slice_key, key)]
            if spec.name == 'example_count':
                # TFMA computes no interval for the example count.
                assert value == point[spec] and not record.HasField('confidence_interval')
                continue
            samples = np.array([sample[spec] for sample in per_sample])
            mean, std = samples.mean(), np.std(samples, ddof=1)
            assert isinstance(value, tfma_types.ValueWithTDistribution)
            assert value.unsampled_value == point[spec]
            assert value.sample_mean == pytest.approx(mean, rel=1e-12)
            assert value.sample_standard_deviation == pytest.approx(std, rel=1e-12)
            assert value.sample_degrees_of_freedom == SAMPLES - 1
            interval = record.confidence_interval
            assert record.value.double_value.value == point[spec]
            assert interval.lower_bound.double_value.value == pytest.approx(mean - t * std)
            assert interval.upper_bound.double_value.value == pytest.approx(mean + t * std)
            assert interval.standard_error.double_value.value == pytest.approx(std)
            assert interval.degrees_of_freedom.value == SAMPLES - 1
            if not spec.example_weighted:
                bounded = loaded[slice_key][spec.name]['boundedValue']
                assert bounded['lowerBound'] == pytest.approx(mean - t * std)
                assert bounded['upperBound'] == pytest.approx(mean + t * std)
                assert bounded['value'] == pytest.approx(point[spec])


def test_samples_are_the_same_whatever_the_batches_and_their_order():
    # A runner splits bundles (and so batches) differently from run to run: the draws, and so
    # every sample's state, depend on the examples alone.
    specs = metrics.metric_specs(_eval_config())
    examples = _examples()
    states, times_of = _bootstrap_states(specs, *examples)
    order = np.random.default_rng(3).permutation(ROWS)
    other_states, other_times = _bootstrap_states(specs, *examples, batch_size=77, order=order)
    assert sorted(times_of, key=str) == sorted(other_times, key=str)
    for where, times in times_of.items():
        assert times.tolist() == other_times[where].tolist(), where
        assert metrics.metric_values(specs, states[where]['']) == pytest.approx(
            metrics.metric_values(specs, other_states[where]['']), rel=1e-12
        )


def test_draws_depend_on_the_seed_the_example_the_slice_and_the_sample():
    keys = resampling.example_keys(_serialized(range(1000)))
    draws = resampling.poisson_draws(keys, (), SAMPLES)
    assert draws.shape == (SAMPLES, 1000)
    # An example's draws are its own: the same from a batch of one.
    alone = resampling.poisson_draws(resampling.example_keys([b'example 5']), (), SAMPLES)
    assert alone[:, 0].tolist() == draws[:, 5].tolist()
    for other in (
        resampling.poisson_draws(resampling.example_keys(_serialized(range(1000)), 1), (), SAMPLES),
        resampling.poisson_draws(keys, CITY, SAMPLES),
    ):
        assert np.mean(other != draws) > 0.5
    # Independent Poisson(1) draws: the frequencies of 0..4 and of 5 or more over 20,000 draws
    # against Poisson(1)'s (a chi-square of 5 degrees of freedom, here and below, under its 0.1%
    # point, 20.5), and no correlation between samples, slices or seeds beyond 4 standard errors.
    counts = np.bincount(np.minimum(draws.ravel(), 5), minlength=6)
    expected = stats.poisson.pmf(np.arange(5), 1.0).tolist()
    expected = draws.size * np.array(expected + [1 - sum(expected)])
    assert np.sum((counts - expected) ** 2 / expected) < stats.chi2.ppf(0.999, 5)
    assert abs(draws.mean() - 1) < 4 / np.sqrt(draws.size)
    pairs = [(draws[0], draws[1]), (draws[0], resampling.poisson_draws(keys, CITY, 1)[0])]
    for a, b in pairs:
        assert abs(np.corrcoef(a, b)[0, 1]) < 4 / np.sqrt(a.size)
    # The examples' keys: a hash of their bytes under the seed.
    assert resampling.example_keys([b'a', b'b'], 7).tolist() == [
        int.from_bytes(hashlib.blake2b(e, digest_size=8, key=b'7').digest(), 'little')
        for e in (b'a', b'b')
    ]


def test_a_sample_that_draws_none_of_a_slice_counts_as_empty():
    # TFMA's sample of a slice exists whatever it drew: one that drew none of the slice's examples
    # has the metrics of no example (an MSE of 0, Keras' divide_no_nan), and the interval still
    # has its 20 samples. A one-example slice misses each sample with probability 1/e.
    eval_config = _eval_config()
    specs = metrics.metric_specs(eval_config)
    keys = resampling.example_keys([b'one example'])
    drawn = resampling.bootstrap(np.array([0]), keys, (), SAMPLES)
    states = {}
    for sample, rows, times in drawn:
        accumulator = metrics.Accumulator(specs)
        if rows is None or rows.size:
            accumulator.update(np.array([1]), np.array([0.25]), np.array([2.0]), times)
        states[((), sample)] = {'': accumulator.state()}
    missed = [sample for sample, rows, _ in drawn if rows is not None and not rows.size]
    assert len(drawn) == SAMPLES + 1 and missed

    values = results.evaluate(specs, states, eval_config, 0, SAMPLES)[()]

    mse = values[tfma.metrics.MetricKey('mse', example_weighted=False)]
    assert isinstance(mse, tfma_types.ValueWithTDistribution)
    assert mse.unsampled_value == 0.75**2
    expected = [0.0 if s in missed else 0.75**2 for s in range(SAMPLES)]
    assert mse.sample_mean == pytest.approx(np.mean(expected))
    assert mse.sample_standard_deviation == pytest.approx(np.std(expected, ddof=1))
    assert tfma.metrics.MetricKey(tfma_constants.ERROR_METRIC_NAME) not in values


def _slice_key(record):
    return slicer_lib.deserialize_slice_key(record.slice_key)
