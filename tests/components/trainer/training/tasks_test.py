"""Each task's loss, metrics and serving outputs on a few hand-made rows, and the regression
label's statistics and the multiclass class names read from a tiny Transform output."""

import math

import numpy as np
import pytest
import tensorflow as tf

from asynctrain.components.trainer import config as config_lib
from asynctrain.components.trainer.training import export, tasks
from asynctrain.components.trainer.training import task as task_lib
from tests.components.trainer.training import task_testdata

CLASSES = ('Adelie (P. adeliae)', 'Chinstrap', 'Gentoo')


def _schema(label_dtype) -> task_lib.TransformedSchema:
    return task_lib.TransformedSchema(
        feature_spec={
            'Culmen Length (mm)': tf.io.FixedLenFeature([], tf.float32),
            'Island': tf.io.FixedLenFeature([], tf.int64),
            'label': tf.io.FixedLenFeature([], label_dtype),
        },
        categorical_rows={'Island': 4},
        label_key='label',
    )


def _config(task_type, **task) -> config_lib.TrainerConfig:
    return config_lib.TrainerConfig(task=config_lib.TaskConfig(type=task_type, **task))


def _results(metrics) -> dict:
    return {name: float(metric.result()) for name, metric in metrics.items()}


def test_binary_loss_metrics_and_serving_outputs():
    task = tasks.BinaryClassificationTask(_schema(tf.int64), _config('binary'))
    assert task.output_shape == (None, 1)
    logits = tf.constant([[0.0], [2.0], [-1.0], [3.0]])
    labels = tf.constant([1, 1, 0, 0], tf.int64)
    p = 1 / (1 + np.exp(-np.array([0.0, 2.0, -1.0, 3.0])))
    log_losses = -np.array([math.log(p[0]), math.log(p[1]), math.log(1 - p[2]), math.log(1 - p[3])])
    assert float(task.loss(labels, logits)) == pytest.approx(log_losses.mean(), rel=1e-6)
    metrics = task.build_metrics()
    task.update_metrics(labels, logits, metrics)
    result = _results(metrics)
    assert result['loss'] == pytest.approx(log_losses.mean(), rel=1e-6)
    # Predicted 1 where p > 0.5: rows 1 and 3; right on rows 1 and 2.
    assert result['accuracy'] == pytest.approx(0.5)
    assert result['label_mean'] == pytest.approx(0.5)
    # Positives score 0.5 and 0.88, negatives 0.27 and 0.95: 2 of 4 pairs ranked right.
    assert result['auc'] == pytest.approx(0.5, abs=1e-3)
    outputs = task.serving_outputs(logits)
    assert set(outputs) == {export.PROBABILITIES}
    np.testing.assert_allclose(outputs[export.PROBABILITIES].numpy(), p[:, None], rtol=1e-6)


def test_multiclass_masks_unseen_classes_and_serves_class_names():
    task = tasks.MulticlassClassificationTask(_schema(tf.int64), _config('multiclass'), CLASSES)
    assert task.output_shape == (None, 3)
    logits = tf.constant([[2.0, 0.0, 0.0], [0.0, 1.0, 3.0], [0.0, 5.0, 0.0], [9.0, 0.0, 0.0]])
    # The last row's class was not in the train split (id -1): no loss, no accuracy.
    labels = tf.constant([0, 1, 1, -1], tf.int64)
    log_softmax = tf.nn.log_softmax(logits).numpy()
    expected_losses = -np.array([log_softmax[0, 0], log_softmax[1, 1], log_softmax[2, 1]])
    assert float(task.loss(labels, logits)) == pytest.approx(expected_losses.mean(), rel=1e-6)
    metrics = task.build_metrics()
    task.update_metrics(labels, logits, metrics)
    result = _results(metrics)
    assert result['loss'] == pytest.approx(expected_losses.mean(), rel=1e-6)
    assert result['accuracy'] == pytest.approx(2 / 3)  # rows 0 and 2 right, row 1 wrong
    assert result['unseen_class_examples'] == 1.0
    outputs = task.serving_outputs(logits)
    assert set(outputs) == {export.PROBABILITIES, export.CLASSES, export.PREDICTED_CLASS}
    np.testing.assert_allclose(
        outputs[export.PROBABILITIES].numpy(), np.exp(log_softmax), rtol=1e-6
    )
    assert outputs[export.CLASSES].shape == (4, 3)
    assert [[c.decode() for c in row] for row in outputs[export.CLASSES].numpy()] == [
        list(CLASSES)
    ] * 4
    assert [c.decode() for c in outputs[export.PREDICTED_CLASS].numpy()] == [
        'Adelie (P. adeliae)',
        'Gentoo',
        'Chinstrap',
        'Adelie (P. adeliae)',
    ]


def test_regression_trains_standardized_and_serves_in_label_units():
    task = tasks.RegressionTask(_schema(tf.float32), _config('regression'))
    task.set_label_statistics(mean=4000.0, std=500.0)
    outputs = tf.constant([[0.0], [1.0], [-2.0]])  # standardized
    labels = tf.constant([4500.0, 4500.0, 3500.0])  # standardized: 1, 1, -1
    # Squared standardized errors: 1, 0, 1.
    assert float(task.loss(labels, outputs)) == pytest.approx(2 / 3)
    served = task.serving_outputs(outputs)
    assert set(served) == {export.PREDICTIONS}
    np.testing.assert_array_equal(
        served[export.PREDICTIONS].numpy(), [[4000.0], [4500.0], [3000.0]]
    )
    metrics = task.build_metrics()
    task.update_metrics(labels, outputs, metrics)
    result = _results(metrics)
    # In grams: errors -500, 0, -500.
    assert result['mse'] == pytest.approx(500.0**2 * 2 / 3)
    assert result['rmse'] == pytest.approx(500.0 * math.sqrt(2 / 3))
    assert result['mae'] == pytest.approx(1000.0 / 3)
    assert result['label_mean'] == pytest.approx(12500.0 / 3)
    assert result['loss'] == pytest.approx(2 / 3)


def test_regression_huber_loss_turns_linear_past_delta():
    task = tasks.RegressionTask(
        _schema(tf.float32), _config('regression', loss='huber', huber_delta=1.0)
    )
    task.set_label_statistics(mean=0.0, std=2.0)
    # Standardized errors 0.5 and 3: 0.5 * 0.25 and 1 * (3 - 0.5).
    loss = task.loss(tf.constant([0.0, 0.0]), tf.constant([[0.5], [3.0]]))
    assert float(loss) == pytest.approx((0.125 + 2.5) / 2)


def test_regression_needs_its_statistics_before_use():
    task = tasks.RegressionTask(_schema(tf.float32), _config('regression'))
    with pytest.raises(RuntimeError, match='prepare'):
        task.loss(tf.constant([1.0]), tf.constant([[0.0]]))


def test_regression_prepare_reads_the_train_split_label_statistics(regression_data):
    schema = task_lib.load_transformed_schema(
        regression_data.transform_graph, regression_data.label_key
    )
    task = tasks.make_task(schema, _config('regression'), regression_data.transform_graph)
    assert isinstance(task, tasks.RegressionTask)
    task.prepare(regression_data.examples)
    masses = np.array([r[task_testdata.REGRESSION_LABEL] for r in regression_data.train_rows])
    # float32 labels, float64 sums.
    assert task.label_mean == pytest.approx(masses.astype(np.float32).mean(), rel=1e-6)
    assert task.label_std == pytest.approx(masses.astype(np.float32).std(), rel=1e-5)
    first = (task.label_mean, task.label_std)
    again = tasks.make_task(schema, _config('regression'), regression_data.transform_graph)
    again.prepare(regression_data.examples)
    assert (again.label_mean, again.label_std) == first


def test_regression_msle_trains_on_the_log_and_serves_in_label_units():
    task = tasks.RegressionTask(_schema(tf.float32), _config('regression', loss='msle'))
    # Statistics of log(1 + label): mean log(1 + 999) = 6.9078, std 1.
    mean = math.log1p(999.0)
    task.set_label_statistics(mean=mean, std=1.0)
    labels = tf.constant([999.0, math.expm1(mean + 1.0), math.expm1(mean - 2.0)])
    outputs = tf.constant([[0.0], [0.0], [-1.0]])  # standardized log errors 0, -1, 1
    assert float(task.loss(labels, outputs)) == pytest.approx(2 / 3, rel=1e-5)
    served = task.serving_outputs(outputs)[export.PREDICTIONS].numpy()[:, 0]
    # exp(mean + output * std) - 1: in the label's units, 999 for a standardized 0.
    np.testing.assert_allclose(served, [999.0, 999.0, math.expm1(mean - 1.0)], rtol=1e-5)
    metrics = task.build_metrics()
    task.update_metrics(labels, outputs, metrics)
    errors = served - labels.numpy()
    assert _results(metrics)['rmse'] == pytest.approx(float(np.sqrt(np.mean(errors**2))), rel=1e-5)


def test_regression_msle_prepare_reads_the_log_label_statistics(regression_data):
    schema = task_lib.load_transformed_schema(
        regression_data.transform_graph, regression_data.label_key
    )
    task = tasks.make_task(
        schema, _config('regression', loss='msle'), regression_data.transform_graph
    )
    task.prepare(regression_data.examples)
    masses = np.array([r[task_testdata.REGRESSION_LABEL] for r in regression_data.train_rows])
    logs = np.log1p(masses.astype(np.float32).astype(np.float64))
    assert task.label_mean == pytest.approx(logs.mean(), rel=1e-6)
    assert task.label_std == pytest.approx(logs.std(), rel=1e-5)


def test_make_task_reads_the_class_names_in_vocabulary_order(multiclass_data):
    import tensorflow_transform as tft

    schema = task_lib.load_transformed_schema(
        multiclass_data.transform_graph, multiclass_data.label_key
    )
    task = tasks.make_task(schema, _config('multiclass'), multiclass_data.transform_graph)
    assert isinstance(task, tasks.MulticlassClassificationTask)
    vocabulary = tft.TFTransformOutput(multiclass_data.transform_graph).vocabulary_by_name(
        tasks.LABEL_VOCABULARY
    )
    assert task.class_names == tuple(v.decode() for v in vocabulary)
    assert sorted(task.class_names) == sorted(task_testdata.CLASSES)
    # The class ids of the eval split name the rows' classes; the unseen class is -1.
    labels = np.concatenate(
        [
            lab.numpy()
            for _, lab in task.build_inputs(multiclass_data.examples, 'eval', training=False)
        ]
    )
    expected = [
        task.class_names.index(r[task_testdata.MULTICLASS_LABEL])
        if r[task_testdata.MULTICLASS_LABEL] in task.class_names
        else -1
        for r in multiclass_data.eval_rows
    ]
    np.testing.assert_array_equal(labels, expected)
    assert expected[-1] == -1
    assert isinstance(
        tasks.make_task(schema, _config('binary'), multiclass_data.transform_graph),
        tasks.BinaryClassificationTask,
    )


def test_multiclass_rejects_a_float_label():
    with pytest.raises(ValueError, match="label 'label': the multiclass task needs an int64"):
        tasks.MulticlassClassificationTask(_schema(tf.float32), _config('multiclass'), CLASSES)
