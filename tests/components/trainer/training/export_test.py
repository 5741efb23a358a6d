"""The serving export of each task, reloaded with the transform output deleted: it parses raw
tf.Examples, runs the embedded transform graph and the model, and returns the task's outputs,
equal to what the model gives on the transformed features."""

import shutil

import numpy as np
import tensorflow as tf

from asynctrain.components.trainer import config as config_lib
from asynctrain.components.trainer.training import export, tasks
from asynctrain.components.trainer.training import task as task_lib
from tests.components.trainer.training import task_testdata


def _export(data, task_type, tmp_path):
    transform_graph = str(tmp_path / 'transform_graph')
    shutil.copytree(data.transform_graph, transform_graph)
    schema = task_lib.load_transformed_schema(transform_graph, data.label_key)
    config = config_lib.TrainerConfig(task=config_lib.TaskConfig(type=task_type))
    task = tasks.make_task(schema, config, transform_graph)
    task.prepare(data.examples)
    keras_model = task.build_model()
    export_dir = str(tmp_path / 'serving')
    export.export_serving_model(
        keras_model, transform_graph, export_dir, task.serving_outputs, tuple(task.element_spec[0])
    )
    shutil.rmtree(transform_graph)
    return task, keras_model, tf.saved_model.load(export_dir)


def _serve(loaded, rows, label_key):
    # Serving rows carry no label.
    examples = tf.constant(
        [task_testdata.raw_example({k: v for k, v in r.items() if k != label_key}) for r in rows]
    )
    transformed = loaded.signatures[export.TRANSFORM_SIGNATURE](examples=examples)
    return loaded.signatures[export.SERVING_SIGNATURE](examples=examples), transformed


def test_multiclass_export_serves_class_names(multiclass_data, tmp_path):
    task, keras_model, loaded = _export(multiclass_data, 'multiclass', tmp_path)
    rows = multiclass_data.eval_rows[:5]
    outputs, transformed = _serve(loaded, rows, multiclass_data.label_key)
    assert set(outputs) == {export.PROBABILITIES, export.CLASSES, export.PREDICTED_CLASS}
    # The model on the export's own transformed features gives the served probabilities.
    features = {name: transformed[name] for name in task.element_spec[0]}
    expected = tf.nn.softmax(keras_model(features)).numpy()
    probabilities = outputs[export.PROBABILITIES].numpy()
    np.testing.assert_allclose(probabilities, expected, rtol=1e-5)
    assert probabilities.shape == (5, 3)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)
    classes = [[c.decode() for c in row] for row in outputs[export.CLASSES].numpy()]
    assert classes == [list(task.class_names)] * 5
    predicted = [c.decode() for c in outputs[export.PREDICTED_CLASS].numpy()]
    assert predicted == [task.class_names[i] for i in probabilities.argmax(axis=1)]
    # The raw feature with spaces and parentheses went through the z-score of the transform.
    lengths = np.array([r[task_testdata.NUMERIC] for r in multiclass_data.train_rows], np.float32)
    np.testing.assert_allclose(
        transformed[task_testdata.NUMERIC].numpy(),
        [(r[task_testdata.NUMERIC] - lengths.mean()) / lengths.std() for r in rows],
        rtol=1e-4,
    )


def test_regression_export_serves_predictions_in_label_units(regression_data, tmp_path):
    task, keras_model, loaded = _export(regression_data, 'regression', tmp_path)
    rows = regression_data.eval_rows[:4]
    outputs, transformed = _serve(loaded, rows, regression_data.label_key)
    assert set(outputs) == {export.PREDICTIONS}
    features = {name: transformed[name] for name in task.element_spec[0]}
    standardized = keras_model(features).numpy()
    predictions = outputs[export.PREDICTIONS].numpy()
    assert predictions.shape == (4, 1) and predictions.dtype == np.float32
    np.testing.assert_allclose(
        predictions, standardized * task.label_std + task.label_mean, rtol=1e-5
    )
    # An untrained model predicts near the standardized zero: about the train mean, in grams.
    assert 3000 < task.label_mean < 6000
    assert np.abs(predictions - task.label_mean).max() < 3 * task.label_std
