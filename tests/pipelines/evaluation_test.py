"""The Evaluator's config of each task, run through TFMA on a hand-made SavedModel.

The model has the export's two signatures (`serving_default` with the task's outputs, several of
them for multiclass, and `transform_features` with the transformed label), so this checks what
the pipeline's EvalConfig asks of TFMA 0.47: the metric classes exist, `prediction_key` picks
the right output of a multi-output signature, the label comes from `transform_features`, the
bound decides the blessing, and the run summary reads the gated metric back by its name.
"""

import math

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_model_analysis as tfma

from components.trainer.training import export
from components.transform import feature_config as fc
from pipelines import pipeline as pipeline_lib
from pipelines import run_summary
from pipelines.config import load_config

pytestmark = pytest.mark.integration

LABEL = 'Species (label)'
CLASSES = ['Adelie', 'Gentoo', 'Chinstrap']
# (raw label, score x): the model's output is a function of x only.
ROWS = [('Adelie', 0.0), ('Gentoo', 1.0), ('Chinstrap', 2.0), ('Adelie', 1.0), ('Gentoo', 1.0)]
REGRESSION_ROWS = [(10.0, 11.0), (20.0, 18.0), (30.0, 30.0), (40.0, 43.0)]
RAW_SPEC = {'x': tf.io.FixedLenFeature([], tf.float32), LABEL: tf.io.VarLenFeature(tf.string)}


class _Model(tf.Module):
    """serving_default and transform_features, as the export writes them, for one task."""

    def __init__(self, task: str):
        super().__init__()
        self._task = task
        self._classes = tf.constant(CLASSES)

    def _transform(self, examples):
        raw = tf.io.parse_example(examples, RAW_SPEC)
        text = tf.reshape(tf.sparse.to_dense(raw[LABEL], default_value=''), [-1])
        if self._task == fc.REGRESSION:
            label = tf.strings.to_number(text)
        else:
            ids = tf.argmax(tf.cast(tf.equal(text[:, None], self._classes[None, :]), tf.int64), 1)
            label = ids if self._task == fc.MULTICLASS else tf.cast(tf.equal(ids, 0), tf.int64)
        return {LABEL: label}, raw['x']

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name='examples')])
    def transform_features(self, examples):
        return self._transform(examples)[0]

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name='examples')])
    def serve(self, examples):
        x = self._transform(examples)[1]
        if self._task == fc.REGRESSION:
            return {export.PREDICTIONS: x[:, None]}
        if self._task == fc.BINARY:  # P(Adelie): high for x == 0.
            return {export.PROBABILITIES: tf.sigmoid(2.0 - 4.0 * x)[:, None]}
        probabilities = tf.one_hot(tf.cast(x, tf.int32), len(CLASSES)) * 0.8 + 0.2 / 3
        batch = tf.shape(x)[0]
        return {
            export.PROBABILITIES: probabilities,
            export.CLASSES: tf.tile(self._classes[None, :], [batch, 1]),
            export.PREDICTED_CLASS: tf.gather(self._classes, tf.argmax(probabilities, 1)),
        }


def _examples(task: str) -> list[bytes]:
    rows = REGRESSION_ROWS if task == fc.REGRESSION else ROWS
    out = []
    for label, x in rows:
        example = tf.train.Example()
        example.features.feature['x'].float_list.value.append(x)
        example.features.feature[LABEL].bytes_list.value.append(str(label).encode())
        out.append(example.SerializeToString())
    return out


def _evaluate(tmp_path, task: str, evaluation: dict):
    model = _Model(task)
    model_dir = str(tmp_path / 'model')
    tf.saved_model.save(
        model,
        model_dir,
        signatures={
            export.SERVING_SIGNATURE: model.serve,
            export.TRANSFORM_SIGNATURE: model.transform_features,
        },
    )
    data = str(tmp_path / 'eval.tfrecord')
    with tf.io.TFRecordWriter(data) as writer:
        for record in _examples(task):
            writer.write(record)
    config = load_config(work_dir=str(tmp_path / 'work'), evaluation=evaluation)
    eval_config = pipeline_lib.eval_config(config, fc.ColumnLabel(LABEL, task))
    output = str(tmp_path / 'evaluation')
    tfma.run_model_analysis(
        eval_shared_model=tfma.default_eval_shared_model(model_dir, eval_config=eval_config),
        eval_config=eval_config,
        data_location=data,
        output_path=output,
    )
    return run_summary._eval_metric(output), tfma.load_validation_result(output).validation_ok


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
