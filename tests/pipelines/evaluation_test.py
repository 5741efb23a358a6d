"""The pipeline's EvalConfig of each task, evaluated by the pipeline's Evaluator on a hand-made
SavedModel.

The model has the export's two signatures (`serving_default` with the task's outputs, several of
them for multiclass, and `transform_features` with the transformed label), so this checks what
the pipeline's EvalConfig asks of the Evaluator: the metric classes exist, `prediction_key` picks
the right output of a multi-output signature, the label comes from `transform_features`, the
bound decides the blessing, and the run summary reads the gated metric back by its name.
(`tests/components/evaluator/equivalence_test.py` checks the same Evaluator against TFMA.)
"""

import math

import apache_beam as beam
import numpy as np
import pytest
import tensorflow_model_analysis as tfma

from asynctrain.components.evaluator import executor, scoring
from asynctrain.components.trainer.training import export
from asynctrain.components.transform import feature_config as fc
from asynctrain.pipelines import run_summary, tfma_config
from asynctrain.pipelines.config import load_config
from tests.components.evaluator import evaluator_testdata as data

pytestmark = pytest.mark.integration

# (raw label, score x): the model's output is a function of x only.
ROWS = [('Adelie', 0.0), ('Gentoo', 1.0), ('Chinstrap', 2.0), ('Adelie', 1.0), ('Gentoo', 1.0)]
REGRESSION_ROWS = [(10.0, 11.0), (20.0, 18.0), (30.0, 30.0), (40.0, 43.0)]


def _evaluate(tmp_path, task: str, evaluation: dict, payment_types=None):
    model_dir = data.save_model(task, str(tmp_path / 'model'))
    rows = REGRESSION_ROWS if task == fc.REGRESSION else ROWS
    data.write_gzip_tfrecords(
        str(tmp_path / 'eval' / 'data'), data.serialize(rows, payment_types=payment_types)
    )
    config = load_config(work_dir=str(tmp_path / 'work'), evaluation=evaluation)
    eval_config = tfma.utils.update_eval_config_with_defaults(
        tfma_config.eval_config(config, fc.ColumnLabel(data.LABEL, task)), rubber_stamp=True
    )
    (model_spec,) = eval_config.model_specs
    model = scoring.ModelToScore(
        name=model_spec.name,
        path=model_dir,
        signature=model_spec.signature_name,
        preprocessing=model_spec.preprocessing_function_names[0],
        label_key=model_spec.label_key,
        prediction_key=model_spec.prediction_key,
    )
    assert (model.signature, model.preprocessing) == (
        export.SERVING_SIGNATURE,
        export.TRANSFORM_SIGNATURE,
    )
    output = str(tmp_path / 'evaluation')
    with beam.Pipeline() as pipeline:
        executor.add_evaluation(
            pipeline, [str(tmp_path / 'eval' / '*')], [model], eval_config, output, batch_size=2
        )
    return run_summary._eval_metric(output), tfma.load_validation_result(output).validation_ok


def test_a_model_good_on_the_whole_split_but_bad_on_a_gated_slice_is_not_blessed(tmp_path):
    # Cash holds Adelie x=0 against x=1 and x=2 (AUC 1); Card holds Adelie x=1 against x=1 (a
    # tie, AUC 0.5); the whole split has AUC 5/6, above its bound of 0.5.
    metric, blessed = _evaluate(
        tmp_path,
        fc.BINARY,
        {'min_value': 0.5, 'slices': [['payment_type']], 'slice_min_value': 0.9},
        payment_types=['Cash', 'Cash', 'Cash', 'Card', 'Card'],
    )
    assert metric == ('auc', pytest.approx(5 / 6, abs=0.01))
    assert blessed is False
    (line,) = run_summary._failed_checks(str(tmp_path / 'evaluation'))
    assert line.startswith('slice payment_type:Card: auc 0.5'), line
    assert "'lowerBound': 0.9" in line


def test_multiclass_accuracy_from_the_probabilities_output(tmp_path):
    # argmax(x): ids 0, 1, 2, 1, 1 against labels 0, 1, 2, 0, 1: 4 of 5 right.
    metric, blessed = _evaluate(tmp_path, fc.MULTICLASS, {'min_value': 0.7})
    assert metric[0] == 'accuracy'
    assert metric[1] == pytest.approx(0.8)
    assert blessed is True


def test_binary_auc_below_its_lower_bound_is_not_blessed(tmp_path):
    # P(Adelie) falls with x; Adelie rows have x 0 and 1, the others 1, 2, 1: AUC from the ties.
    metric, blessed = _evaluate(tmp_path, fc.BINARY, {'min_value': 0.95})
    positives, negatives = [0.0, 1.0], [1.0, 2.0, 1.0]
    pairs = [(p < n) + 0.5 * (p == n) for p in positives for n in negatives]
    assert metric[0] == 'auc'
    assert metric[1] == pytest.approx(np.mean(pairs), abs=0.02)
    assert blessed is False


def test_regression_rmse_in_label_units_under_its_upper_bound(tmp_path):
    metric, blessed = _evaluate(tmp_path, fc.REGRESSION, {'max_value': 2.5})
    rmse = math.sqrt(np.mean([(y - x) ** 2 for y, x in REGRESSION_ROWS]))  # sqrt(14 / 4)
    assert metric[0] == 'rmse'
    assert metric[1] == pytest.approx(rmse, rel=1e-5)
    assert blessed is True
