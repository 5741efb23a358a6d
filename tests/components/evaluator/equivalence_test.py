"""asynctrain's Evaluator against stock TFMA on the same models and examples: the same metric
keys, the same values, the same threshold checks and blessing, per task and with a baseline.

TFMA runs through `tfma.run_model_analysis` (the engine inside stock Evaluator); ours through
`scoring.ScoreExamples` and `executor.evaluate_and_write`, in small batches so that states from
several batches are merged.
"""

import apache_beam as beam
import pytest
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.writers import metrics_plots_and_validations_writer as tfma_writer
from tfx.types import standard_artifacts

from asynctrain.components.evaluator import executor
from asynctrain.components.transform import feature_config as fc
from asynctrain.pipelines import pipeline as pipeline_lib
from asynctrain.pipelines.config import load_config
from tests.components.evaluator import evaluator_testdata as data

pytestmark = pytest.mark.integration

ROWS = 3000
# Ours accumulates in float64 as TFMA does, and AUC sums the same 10,000 threshold buckets.


def _model_artifact(tmp_path, name: str, task: str, slope: float):
    artifact = standard_artifacts.Model()
    artifact.uri = str(tmp_path / name)
    artifact.id = {'candidate': 11, 'baseline': 7}[name]
    data.save_model(task, str(tmp_path / name / 'Format-Serving'), slope)
    return artifact


def _run_both(tmp_path, task, evaluation, candidate_slope=4.0, baseline_slope=None):
    records = data.serialize(data.random_rows(task, ROWS))
    files = data.write_gzip_tfrecords(str(tmp_path / 'examples' / 'data'), records, num_files=3)
    pattern = str(tmp_path / 'examples' / '*')
    config = load_config(work_dir=str(tmp_path / 'work'), evaluation=evaluation)
    raw_config = pipeline_lib.eval_config(config, fc.ColumnLabel(data.LABEL, task))
    has_baseline = baseline_slope is not None
    eval_config = tfma.utils.update_eval_config_with_defaults(
        raw_config, has_baseline=has_baseline, rubber_stamp=True
    )
    model = _model_artifact(tmp_path, 'candidate', task, candidate_slope)
    baseline = _model_artifact(tmp_path, 'baseline', task, baseline_slope) if has_baseline else None
    models = executor.models_to_score(eval_config, model, baseline)

    stock_dir = str(tmp_path / 'stock')
    shared = [
        tfma.default_eval_shared_model(m.path, eval_config=eval_config, model_name=m.name)
        for m in models
    ]
    tfma.run_model_analysis(
        eval_shared_model=shared[0] if len(shared) == 1 else shared,
        eval_config=eval_config,
        data_location=pattern,
        output_path=stock_dir,
    )

    ours_dir = str(tmp_path / 'ours')
    with beam.Pipeline() as pipeline:
        executor.add_evaluation(pipeline, [pattern], models, eval_config, ours_dir, batch_size=256)
    assert len(files) == 3
    return stock_dir, ours_dir


def _values(output_dir):
    (slice_metrics,) = list(tfma_writer.load_and_deserialize_metrics(output_dir))
    assert slice_metrics.slice_key == type(slice_metrics.slice_key)()  # the overall slice
    return {
        tfma.metrics.MetricKey.from_proto(kv.key): kv.value.double_value.value
        for kv in slice_metrics.metric_keys_and_values
    }


def _failures(output_dir):
    result = tfma.load_validation_result(output_dir)
    keys = {
        tfma.metrics.MetricKey.from_proto(failure.metric_key)
        for per_slice in result.metric_validations_per_slice
        for failure in per_slice.failures
    }
    return result.validation_ok, keys


def _assert_same(stock_dir, ours_dir):
    stock, ours = _values(stock_dir), _values(ours_dir)
    assert sorted(ours, key=str) == sorted(stock, key=str)
    for key, value in stock.items():
        assert ours[key] == pytest.approx(value, rel=1e-6, abs=1e-9), key
    assert _failures(ours_dir) == _failures(stock_dir)
    return ours


@pytest.mark.parametrize(
    'task, evaluation, blessing_metric',
    [
        (fc.BINARY, {'min_value': 0.8}, 'auc'),
        (fc.MULTICLASS, {'min_value': 0.9}, 'accuracy'),
        (fc.REGRESSION, {'max_value': 4.0}, 'rmse'),
    ],
)
def test_same_metrics_and_checks_as_tfma(tmp_path, task, evaluation, blessing_metric):
    stock_dir, ours_dir = _run_both(tmp_path, task, evaluation)
    ours = _assert_same(stock_dir, ours_dir)
    assert ours[tfma.metrics.MetricKey('example_count', example_weighted=False)] == ROWS
    value = ours[tfma.metrics.MetricKey(blessing_metric, example_weighted=False)]
    assert 0.0 < value < (100.0 if task == fc.REGRESSION else 1.0)
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
    evaluation = {'min_value': 0.3, 'baseline': 'latest_blessed', 'max_regression': 0.0}
    stock_dir, ours_dir = _run_both(
        tmp_path, fc.MULTICLASS, evaluation, candidate_slope, baseline_slope
    )
    ours = _assert_same(stock_dir, ours_dir)
    key = tfma.metrics.MetricKey('accuracy', model_name='candidate', example_weighted=False)
    diff = ours[key._replace(is_diff=True)]
    assert diff == pytest.approx(ours[key] - ours[key._replace(model_name='baseline')])
    assert (diff > 0.1) if blessed else (diff < -0.1)
    ok, failures = _failures(ours_dir)
    assert ok is blessed
    assert failures == (set() if blessed else {key._replace(is_diff=True)})
