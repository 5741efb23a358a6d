"""asynctrain's Evaluator against stock TFMA on the same models and examples: the same metric
keys, the same values, the same threshold checks and blessing, per task and with a baseline.

TFMA runs through `tfma.run_model_analysis` (the engine inside stock Evaluator); ours through
`scoring.ScoreExamples` and `executor.evaluate_and_write`, in small batches so that states from
several batches are merged. The examples carry raw features the models never read
(`evaluator_testdata.serialize`), and the binary and baseline cases slice on them: feature keys,
a feature cross over a multi-valued feature, feature values, the label (a raw feature that the
transform also outputs under its name), cross slices, and per-slice and cross-slice thresholds
that fail on the slice where the model is bad.

Where ours departs from TFMA on purpose, TFMA is configured or read to match: it slices the raw
features (`evaluation_outputs.run_stock`, where TFMA alone would slice the transformed label), and
the AUC it gives a one-class slice (0) is ours' undefined value, whose gates ours does not apply
(`evaluation_outputs.comparable_failures`).
"""

import json
import math

import apache_beam as beam
import pytest
import tensorflow as tf
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.proto import config_pb2
from tensorflow_model_analysis.slicer import slicer_lib
from tfx.types import standard_artifacts

from asynctrain.components.evaluator import checks, executor
from asynctrain.components.transform import feature_config as fc
from asynctrain.pipelines import tfma_config
from asynctrain.pipelines.config import load_config
from asynctrain.testing import evaluation_outputs
from tests import fresh_process
from tests.components.evaluator import evaluator_testdata as data

pytestmark = pytest.mark.integration

ROWS = 3000
# TFMA's bootstrap computes every metric 21 times, example by example: a third of the rows keeps
# each case under a minute (the standard errors' comparison does not depend on the row count).
BOOTSTRAP_ROWS = 1000
# Ours accumulates in float64 as TFMA does, and AUC sums the same 10,000 threshold buckets.


def _model_artifact(tmp_path, name: str, task: str, slope: float):
    artifact = standard_artifacts.Model()
    artifact.uri = str(tmp_path / name)
    artifact.id = {'candidate': 11, 'baseline': 7}[name]
    data.save_model(task, str(tmp_path / name / 'Format-Serving'), slope)
    return artifact


SLICES = [['payment_type'], ['trip_start_hour'], ['payment_type', 'company']]


def _more_slices(eval_config, metric):
    """Adds what the pipeline's settings do not write: feature values, a slice on the label, a
    cross slice, a cross-slice threshold on `metric`, and the calibration and confusion-matrix
    (PR and ROC curves) plots."""
    eval_config.slicing_specs.extend(
        [
            config_pb2.SlicingSpec(
                feature_keys=['trip_start_hour'], feature_values={'payment_type': 'Cash'}
            ),
            config_pb2.SlicingSpec(feature_values={'trip_start_hour': '2'}),
            config_pb2.SlicingSpec(feature_keys=[data.LABEL]),
        ]
    )
    cross = config_pb2.CrossSlicingSpec(
        baseline_spec=config_pb2.SlicingSpec(),
        slicing_specs=[config_pb2.SlicingSpec(feature_keys=['payment_type'])],
    )
    eval_config.cross_slicing_specs.append(cross)
    eval_config.metrics_specs[0].metrics.extend(
        [
            config_pb2.MetricConfig(class_name='CalibrationPlot'),
            config_pb2.MetricConfig(class_name='ConfusionMatrixPlot'),
        ]
    )
    (config,) = [
        m
        for spec in eval_config.metrics_specs
        for m in spec.metrics
        if json.loads(m.config or '{}').get('name') == metric
    ]
    config.cross_slice_thresholds.append(
        config_pb2.CrossSliceMetricThreshold(
            cross_slicing_specs=[cross],
            threshold=config_pb2.MetricThreshold(
                value_threshold=config_pb2.GenericValueThreshold(upper_bound={'value': 0.1})
            ),
        )
    )


def _run_both(
    tmp_path,
    task,
    evaluation,
    candidate_slope=4.0,
    baseline_slope=None,
    more_slices=None,
    weights=None,
    confidence_intervals=False,
    extra_metrics=(),
    interval_method='JACKKNIFE',
    rows=ROWS,
):
    """Both evaluators on the same models and examples; `weights`: None, 'default' (an
    `example_weight_key`: TFMA then weighs every metric) or 'both' (weighted and unweighted);
    `interval_method` names TFMA's `ConfidenceIntervalOptions` method (TFMA's bootstrap then runs
    with a fixed seed and string hash seed, and ours draws from the examples' bytes, so that
    the comparison of the two is the same on every run)."""
    records = data.serialize(data.random_rows(task, rows), slice_features=True)
    files = data.write_gzip_tfrecords(str(tmp_path / 'examples' / 'data'), records, num_files=3)
    pattern = str(tmp_path / 'examples' / '*')
    config = load_config(work_dir=str(tmp_path / 'work'), evaluation=evaluation)
    raw_config = tfma_config.eval_config(config, fc.ColumnLabel(data.LABEL, task))
    if more_slices:
        _more_slices(raw_config, more_slices)
    if weights:
        for model_spec in raw_config.model_specs:
            model_spec.example_weight_key = data.WEIGHT
    raw_config.options.compute_confidence_intervals.value = confidence_intervals
    raw_config.options.confidence_intervals.method = getattr(
        config_pb2.ConfidenceIntervalOptions, interval_method
    )
    raw_config.metrics_specs[0].metrics.extend(
        config_pb2.MetricConfig(class_name=name) for name in extra_metrics
    )
    if weights == 'both':
        for metrics_spec in raw_config.metrics_specs:
            metrics_spec.example_weights.weighted = True
            metrics_spec.example_weights.unweighted = True
    has_baseline = baseline_slope is not None
    eval_config = tfma.utils.update_eval_config_with_defaults(
        raw_config, has_baseline=has_baseline, rubber_stamp=True
    )
    model = _model_artifact(tmp_path, 'candidate', task, candidate_slope)
    baseline = _model_artifact(tmp_path, 'baseline', task, baseline_slope) if has_baseline else None
    models = executor.models_to_score(eval_config, model, baseline)

    stock_dir = str(tmp_path / 'stock')
    stock_run = dict(
        eval_config=eval_config,
        model_paths={m.name: m.path for m in models},
        data_location=pattern,
        output_path=stock_dir,
    )
    if interval_method == 'POISSON_BOOTSTRAP':
        # TFMA's seeded bootstrap gives each sample one generator that draws for the examples in
        # the order they come, and each example comes once per slice in the order of a `set` of
        # its slice keys (`_FanoutSlicesDoFn`, tensorflow_model_analysis/slicer/slicer_lib.py):
        # which slice gets which draws follows the process's string hash seed. Fixed, its draws
        # are the same on every run.
        fresh_process.call(
            evaluation_outputs.run_stock,
            {**stock_run, 'seed': 1},
            timeout=600,
            env={'PYTHONHASHSEED': '0'},
        )
    else:
        evaluation_outputs.run_stock(**stock_run)

    ours_dir = str(tmp_path / 'ours')
    with beam.Pipeline() as pipeline:
        executor.add_evaluation(pipeline, [pattern], models, eval_config, ours_dir, batch_size=256)
    assert len(files) == 3
    return stock_dir, ours_dir, records


def _weight_sum(records):
    return sum(
        tf.train.Example.FromString(r).features.feature[data.WEIGHT].float_list.value[0]
        for r in records
    )


@pytest.mark.parametrize(
    'task, evaluation, blessing_metric, weights',
    [
        (fc.BINARY, {'min_value': 0.8, 'slices': SLICES, 'slice_min_value': 0.7}, 'auc', None),
        (fc.MULTICLASS, {'min_value': 0.9}, 'accuracy', 'default'),
        (fc.REGRESSION, {'max_value': 4.0}, 'rmse', 'both'),
    ],
)
def test_same_metrics_and_checks_as_tfma(tmp_path, task, evaluation, blessing_metric, weights):
    sliced = 'slices' in evaluation
    # The regression case also computes TFMA's default confidence intervals (jackknife).
    stock_dir, ours_dir, records = _run_both(
        tmp_path,
        task,
        evaluation,
        more_slices=blessing_metric if sliced else None,
        weights=weights,
        confidence_intervals=task == fc.REGRESSION,
        extra_metrics=['MultiClassConfusionMatrixPlot'] if task == fc.MULTICLASS else [],
    )
    # TFMA's own MeanSquaredError is wrong under its jackknife: its combiner's
    # `merge_accumulators` merges the first accumulator into itself when given a list (as the
    # jackknife's `_AccumulatorCombineFn` does), so its value moves with the random partitions.
    # Ours is compared with the RMSE instead, which TFMA gets right.
    ours = evaluation_outputs.assert_same(
        stock_dir, ours_dir, not_compared={'mse'} if task == fc.REGRESSION else ()
    )
    if task == fc.REGRESSION:
        for example_weighted in (False, True):
            mse, rmse = (
                ours[()][tfma.metrics.MetricKey(name, example_weighted=example_weighted)]
                for name in ('mse', 'rmse')
            )
            assert mse == pytest.approx(rmse**2, rel=1e-6)
    weighted = [w for w in (False, True) if (w if weights else not w) or weights == 'both']
    count = tfma.metrics.MetricKey('example_count', example_weighted=weighted[0])
    assert {k.example_weighted for k in ours[()]} == set(weighted)
    if weights:
        # TFMA's example count with weights is their sum.
        weighted_count = ours[()][count._replace(example_weighted=True)]
        assert weighted_count == pytest.approx(_weight_sum(records), rel=1e-6)
    if weights != 'default':
        assert ours[()][count._replace(example_weighted=False)] == ROWS
    value = ours[()][tfma.metrics.MetricKey(blessing_metric, example_weighted=weighted[-1])]
    assert 0.0 < value < (100.0 if task == fc.REGRESSION else 1.0)
    if weights == 'both':
        unweighted = ours[()][tfma.metrics.MetricKey(blessing_metric, example_weighted=False)]
        assert abs(value - unweighted) > 1e-4  # the weights do change the metric
    if task == fc.MULTICLASS:
        # The weighted confusion matrix of the 3 classes (no "no prediction" column -1: the top
        # probability is 0.8), its entries adding up to the weighted example count.
        (((slice_key, _), plot),) = evaluation_outputs.plots(ours_dir).items()
        (matrix,) = plot['multiClassConfusionMatrixAtThresholds']['matrices']
        predicted = {e.get('predictedClassId', 0) for e in matrix['entries']}  # proto3 drops 0
        assert slice_key == () and predicted == {0, 1, 2}
        total = sum(e['numWeightedExamples'] for e in matrix['entries'])
        assert total == pytest.approx(_weight_sum(records), rel=1e-6)
    intervals = evaluation_outputs.intervals(ours_dir)
    if task == fc.REGRESSION:
        # Every metric but the count, weighted and unweighted, has its 20-partition interval.
        assert {k.name for _, k in intervals} == {'rmse', 'mse'}
        assert len(intervals) == 4
        for lower, point, upper, freedom, _ in intervals.values():
            assert lower < point < upper and freedom == 19
    else:
        assert not intervals
    if sliced:
        _assert_slices(ours, blessing_metric, ours_dir)
    else:
        assert list(ours) == [()]
    # The eval_config written is the one evaluated (TFMA's loader reads it back).
    loaded = tfma.load_eval_result(ours_dir)
    assert loaded.model_location.endswith('Format-Serving')


@pytest.mark.parametrize(
    'candidate_slope, baseline_slope, blessed', [(4.0, 8.0, True), (8.0, 4.0, False)]
)
def test_same_change_check_against_a_baseline_as_tfma(
    tmp_path, candidate_slope, baseline_slope, blessed
):
    # Labels are floor(x + noise): slope 4 predicts floor(x), the better model; slope 8 predicts
    # floor(2x). No regression of accuracy is allowed, so only the better candidate is blessed.
    evaluation = {
        'min_value': 0.3,
        'baseline': 'latest_blessed',
        'max_regression': 0.0,
        'slices': [['payment_type']],
        'slice_max_regression': 0.0,
    }
    stock_dir, ours_dir, _ = _run_both(
        tmp_path, fc.MULTICLASS, evaluation, candidate_slope, baseline_slope
    )
    ours = evaluation_outputs.assert_same(stock_dir, ours_dir)
    key = tfma.metrics.MetricKey('accuracy', model_name='candidate', example_weighted=False)
    overall = ours[()]
    diff = overall[key._replace(is_diff=True)]
    assert diff == pytest.approx(overall[key] - overall[key._replace(model_name='baseline')])
    assert (diff > 0.1) if blessed else (diff < -0.1)
    ok, failures, _ = evaluation_outputs.failures(ours_dir)
    # The change check runs on the whole split and on every payment slice: every slice where
    # the candidate is worse fails, and only those; the better candidate on the whole split is
    # blessed only if no slice is worse.
    failed = {(slice_key, metric_key) for slice_key, metric_key, _ in failures}
    worse = {s for s, values in ours.items() if values[key._replace(is_diff=True)] < 0.0}
    assert failed == {(s, key._replace(is_diff=True)) for s in worse}
    assert (() in worse) is (not blessed)
    assert ok is (not worse)
    if not blessed:
        assert len(worse) > 1


def _assert_slices(ours, metric, ours_dir):
    """The binary case's slices: what came out, and the failures as the run summary words them."""
    count = tfma.metrics.MetricKey('example_count', example_weighted=False)
    auc = tfma.metrics.MetricKey(metric, example_weighted=False)
    single = {k: v for k, v in ours.items() if not slicer_lib.is_cross_slice_key(k)}
    payments = {k: v[count] for k, v in single.items() if len(k) == 1 and k[0][0] == 'payment_type'}
    # Some examples have no payment type: they are in no payment slice.
    assert set(payments) == {(('payment_type', p),) for p in data.PAYMENT_TYPES}
    assert 0.9 * ROWS < sum(payments.values()) < ROWS
    hours = {k[0][1] for k in single if len(k) == 1 and k[0][0] == 'trip_start_hour'}
    assert hours == {0, 1, 2, 3}  # int64 values stay ints in the slice keys
    # A multi-valued feature: an example is in the slice of each of its companies.
    crossed = [
        v[count] for k, v in single.items() if [c for c, _ in k] == ['company', 'payment_type']
    ]
    assert len(crossed) == 9 and sum(crossed) > sum(payments.values())
    # The label slices are its raw values (TFMA alone would take the transformed 0 and 1), each
    # of one class, where AUC is undefined.
    labels = {k for k in single if k and k[0][0] == data.LABEL}
    assert labels == {((data.LABEL, name),) for name in data.CLASSES}
    assert all(math.isnan(ours[k][auc]) for k in labels)
    mobile = (('payment_type', 'Mobile'),)
    assert ours[mobile][auc] < 0.7 < ours[(('payment_type', 'Cash'),)][auc]
    # Cross slice: the overall slice's value minus the slice's.
    assert ours[((), mobile)][auc] == pytest.approx(ours[()][auc] - ours[mobile][auc])
    ok, failures, missing = evaluation_outputs.failures(ours_dir)
    assert not ok and not missing
    failed = {slice_key for slice_key, _, _ in failures}
    assert mobile in failed and ((), mobile) in failed and () not in failed
    # Both plots of every single slice, none of the cross slices (as TFMA), read by TFMA's loader.
    # (TFMA writes both plots of a slice under one key, without their names.)
    plots = evaluation_outputs.plots(ours_dir)
    assert sorted((slice_key for slice_key, _ in plots), key=str) == sorted(single, key=str)
    for plot in plots.values():
        # 1,000 buckets plus the two open ends; 1,001 thresholds plus one below 0.
        assert len(plot['calibrationHistogramBuckets']['buckets']) == 1002
        assert len(plot['confusionMatrixAtThresholds']['matrices']) == 1002
    # TFMA's loader lists the cross slices' (empty) plots too, as None.
    (overall,) = [v for k, v in tfma.load_eval_result(ours_dir).plots if k == () and v]
    assert len(overall['']['']['calibrationHistogramBuckets']['buckets']) == 1002
    lines = checks.failures(tfma.load_validation_result(ours_dir))
    assert any(line.startswith('slice payment_type:Mobile: auc 0.') for line in lines), lines


@pytest.mark.parametrize(
    'task, evaluation, weights, baseline_slope',
    [
        # TFMA's bootstrap computes every metric 21 times over, example by example: the binary
        # case slices on one feature (all of `SLICES` and `_more_slices` took it 3 to 5 minutes).
        (
            fc.BINARY,
            {'min_value': 0.8, 'slices': [['payment_type']], 'slice_min_value': 0.7},
            None,
            None,
        ),
        (fc.REGRESSION, {'max_value': 4.0}, 'both', None),
        # A candidate and a baseline: one draw per (slice, example) for both, so the diff's
        # interval is that of the difference on the same samples.
        (
            fc.MULTICLASS,
            {'min_value': 0.3, 'baseline': 'latest_blessed', 'max_regression': 0.0},
            None,
            8.0,
        ),
    ],
)
def test_same_bootstrap_intervals_as_tfma(tmp_path, task, evaluation, weights, baseline_slope):
    stock_dir, ours_dir, _ = _run_both(
        tmp_path,
        task,
        evaluation,
        baseline_slope=baseline_slope,
        weights=weights,
        confidence_intervals=True,
        interval_method='POISSON_BOOTSTRAP',
        rows=BOOTSTRAP_ROWS,
    )
    # The same slices, keys, point values and checks, and intervals on the same metrics of the
    # same slices (candidate and weighted ones included).
    ours = evaluation_outputs.assert_same(stock_dir, ours_dir)
    stock_intervals, ours_intervals = (
        evaluation_outputs.intervals(stock_dir),
        evaluation_outputs.intervals(ours_dir),
    )
    # Binary: auc and accuracy of the overall slice and of each payment type; regression: rmse
    # and mse, weighted and unweighted; multiclass: the candidate's, the baseline's and the diff's
    # accuracy, and the example count's diff (TFMA skips the count's own keys, not its diff's).
    assert len(ours_intervals) == {fc.BINARY: 8, fc.REGRESSION: 4, fc.MULTICLASS: 4}[task]
    if baseline_slope is not None:
        diffs = {key[1].name: key for key in ours_intervals if key[1].is_diff}
        assert sorted(diffs) == ['accuracy', 'example_count']
        # Both models count each example the same number of times in a sample (as in TFMA): the
        # counts' diff is 0 in every sample.
        count = diffs['example_count']
        assert ours_intervals[count][4] == 0.0 == stock_intervals[count][4]
    for key, (lower, point, upper, freedom, error) in ours_intervals.items():
        assert freedom == 19 and lower <= upper, key
        assert point == pytest.approx(ours[key[0]][key[1]])
        # Each standard error is the standard deviation of 20 samples: s^2 / sigma^2 is
        # chi-square with 19 degrees of freedom / 19, so the ratio of two independent estimates
        # of one sigma squared is F(19, 19). Ours and TFMA's fall outside a factor of 2 of each
        # other with probability 0.4%, of 3 with 0.001% (scipy.stats.f.sf(4 or 9, 19, 19) * 2):
        # a factor of 2 on the overall slice's few metrics, of 3 on every other slice's, so that
        # a sound bootstrap fails this for well under one seed in a hundred, and both draw the
        # same on every run (`_run_both`): the outcome is the same on every run. It catches gross
        # errors (no resampling, multiplicities that miss the weights or the scale);
        # `bootstrap_test` checks the samples exactly.
        stock_error = stock_intervals[key][4]
        factor = 2.0 if key[0] == () else 3.0
        if stock_error == 0.0:
            assert error == 0.0, key  # e.g. an accuracy every sample gets right
        else:
            assert 1 / factor < error / stock_error < factor, (key, error, stock_error)
