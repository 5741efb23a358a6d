"""`trainer.model_module`: a user's `build_model` loads by path, trains on an in-process
parameter-server cluster (multiclass), exports and serves class names; regression trains with
the built-in model and serves in the label's units; a wrong output shape or a broken module fails
before any training, naming what was expected."""

import re
import shutil
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from asynctrain.components.trainer import config as config_lib
from asynctrain.components.trainer.cluster import launch
from asynctrain.components.trainer.training import export, model_module, run_files, tasks
from asynctrain.components.trainer.training import task as task_lib
from tests.components.trainer.trainer_testdata import REPO_ROOT
from tests.components.trainer.training import task_testdata

pytestmark = pytest.mark.integration

WIDE_MODEL = str(REPO_ROOT / 'examples' / 'model_module' / 'wide_model.py')


def _config(
    task_type, model_module_path='', train_steps=60, cluster='in_process'
) -> config_lib.TrainerConfig:
    return config_lib.TrainerConfig(
        task=config_lib.TaskConfig(type=task_type),
        model_module=model_module_path,
        training=config_lib.TrainingConfig(
            train_steps=train_steps,
            batch_size=32,
            learning_rate=0.1,
            steps_per_execution=10,
            checkpoint_interval_steps=0,
            summary_interval_steps=20,
        ),
        distribution=config_lib.DistributionConfig(cluster=cluster, num_workers=1, num_ps=2),
    )


def _train(data, config, tmp_path):
    transform_graph = str(tmp_path / 'transform_graph')
    shutil.copytree(data.transform_graph, transform_graph)
    serving_dir = str(tmp_path / 'model' / 'Format-Serving')
    report = launch.train_and_export(
        data.examples, transform_graph, serving_dir, str(tmp_path / 'run'), config, data.label_key
    )
    shutil.rmtree(transform_graph)  # the export must stand alone
    return report, tf.saved_model.load(serving_dir)


def _serving_examples(rows, label_key):
    return tf.constant(
        [task_testdata.raw_example({k: v for k, v in r.items() if k != label_key}) for r in rows]
    )


def test_user_model_trains_on_parameter_servers_and_serves_class_names(multiclass_data, tmp_path):
    report, loaded = _train(multiclass_data, _config('multiclass', WIDE_MODEL), tmp_path)
    assert report.steps == 60
    # 59 eval rows of three balanced classes (one of an unseen class is left out): the
    # majority-class baseline is about 1/3; the classes separate well on culmen length.
    assert report.eval['unseen_class_examples'] == 1.0
    assert report.eval['accuracy'] > 0.8
    checkpoint_dir = str(tmp_path / 'run' / run_files.CHECKPOINT_SUBDIR)
    assert tf.train.latest_checkpoint(checkpoint_dir).endswith('-60')
    rows = [
        r
        for r in multiclass_data.eval_rows
        if r[task_testdata.MULTICLASS_LABEL] in task_testdata.CLASSES
    ]
    outputs = loaded.signatures[export.SERVING_SIGNATURE](
        examples=_serving_examples(rows, multiclass_data.label_key)
    )
    predicted = [c.decode() for c in outputs[export.PREDICTED_CLASS].numpy()]
    truth = [r[task_testdata.MULTICLASS_LABEL] for r in rows]
    assert np.mean([p == t for p, t in zip(predicted, truth)]) > 0.8
    assert sorted(c.decode() for c in outputs[export.CLASSES].numpy()[0]) == sorted(
        task_testdata.CLASSES
    )
    assert outputs[export.PROBABILITIES].shape == (len(rows), 3)


def test_user_model_trains_on_local_process_servers_and_warm_starts(multiclass_data, tmp_path):
    """The same module with each server a separate process (and the coordinator supervised by
    recovery), then warm-started into a second run from the first export."""
    config = _config('multiclass', WIDE_MODEL, train_steps=40, cluster='local_processes')
    report, loaded = _train(multiclass_data, config, tmp_path / 'first')
    assert (report.steps, report.num_workers, report.num_ps, report.restarts) == (40, 1, 2, 0)
    assert report.eval['accuracy'] > 0.7
    rows = [
        r
        for r in multiclass_data.eval_rows
        if r[task_testdata.MULTICLASS_LABEL] in task_testdata.CLASSES
    ]
    outputs = loaded.signatures[export.SERVING_SIGNATURE](
        examples=_serving_examples(rows, multiclass_data.label_key)
    )
    assert set(c.decode() for c in outputs[export.PREDICTED_CLASS].numpy()) <= set(
        task_testdata.CLASSES
    )
    # Warm start (in-process this time): ten more steps from the first export's weights keep its
    # accuracy; the weights come from the exported model, not from a checkpoint.
    base_model = str(tmp_path / 'first' / 'model' / 'Format-Serving')
    warm_report = launch.train_and_export(
        multiclass_data.examples,
        multiclass_data.transform_graph,
        str(tmp_path / 'warm' / 'model' / 'Format-Serving'),
        str(tmp_path / 'warm' / 'run'),
        _config('multiclass', WIDE_MODEL, train_steps=10),
        multiclass_data.label_key,
        base_model_dir=base_model,
    )
    assert warm_report.eval['accuracy'] >= report.eval['accuracy'] - 0.05


def test_regression_serves_predictions_in_label_units(regression_data, tmp_path):
    report, loaded = _train(regression_data, _config('regression', train_steps=80), tmp_path)
    masses = np.array([r[task_testdata.REGRESSION_LABEL] for r in regression_data.eval_rows])
    baseline_rmse = np.sqrt(np.mean((masses - masses.mean()) ** 2))  # the mean predictor
    assert report.eval['label_mean'] == pytest.approx(masses.mean(), rel=1e-5)
    assert report.eval['rmse'] < 0.7 * baseline_rmse
    outputs = loaded.signatures[export.SERVING_SIGNATURE](
        examples=_serving_examples(regression_data.eval_rows, regression_data.label_key)
    )
    predictions = outputs[export.PREDICTIONS].numpy()[:, 0]
    served_rmse = np.sqrt(np.mean((predictions - masses) ** 2))
    assert served_rmse == pytest.approx(report.eval['rmse'], rel=1e-3)


def _write_module(tmp_path, body) -> str:
    path = tmp_path / 'my_model.py'
    path.write_text(textwrap.dedent(body))
    return str(path)


def test_wrong_output_shape_fails_before_training(multiclass_data, tmp_path):
    path = _write_module(
        tmp_path,
        """
        import tensorflow as tf
        from asynctrain.components.trainer.training import model

        def build_model(features, config):
            inputs = model.feature_inputs(features)
            x = tf.keras.layers.Reshape((1,))(inputs['Culmen Length (mm)'])
            return tf.keras.Model(inputs, tf.keras.layers.Dense(1)(x))
        """,
    )
    expected = (
        f'trainer.model_module ({path}): build_model returned output shape (None, 1); '
        'the multiclass task with 3 classes expects (None, 3)'
    )
    schema = task_lib.load_transformed_schema(multiclass_data.transform_graph, 'Species')
    task = tasks.make_task(schema, _config('multiclass', path), multiclass_data.transform_graph)
    with pytest.raises(ValueError) as error:
        task.build_model()
    assert str(error.value) == expected
    # Through the whole Trainer (which trains in a child process): the same message, and
    # nothing trained, checkpointed or exported.
    with pytest.raises(Exception, match=re.escape(expected)):
        _train(multiclass_data, _config('multiclass', path), tmp_path)
    assert not tf.io.gfile.exists(
        str(tmp_path / 'run' / run_files.CHECKPOINT_SUBDIR / 'checkpoint')
    )
    assert not tf.io.gfile.exists(str(tmp_path / 'model'))


def test_a_keras_3_model_is_refused_naming_the_module_and_what_to_change(multiclass_data, tmp_path):
    """`import keras` is Keras 3 on both lines (TensorFlow 2.16+ installs it), which cannot train
    under ParameterServerStrategy: refused before training, saying to build with tf_keras."""
    import keras

    path = _write_module(
        tmp_path,
        """
        import keras
        from asynctrain.components.trainer.training import model

        def build_model(features, config):
            inputs = {
                name: keras.Input(shape=(), name=name) for name in features.numeric
            }
            x = keras.layers.Concatenate()([keras.layers.Reshape((1,))(t) for t in inputs.values()])
            return keras.Model(inputs, keras.layers.Dense(features.num_outputs)(x))
        """,
    )
    schema = task_lib.load_transformed_schema(multiclass_data.transform_graph, 'Species')
    task = tasks.make_task(schema, _config('multiclass', path), multiclass_data.transform_graph)
    with pytest.raises(ValueError) as error:
        task.build_model()
    assert str(error.value) == (
        f'trainer.model_module ({path}): build_model returned a Keras 3 model (Functional, '
        f'keras {keras.__version__}); asynctrain trains under ParameterServerStrategy, which '
        'Keras 3 does not support. Build it with Keras 2: `import tf_keras as keras`, or '
        '`tf.keras` (asynctrain sets TF_USE_LEGACY_KERAS=1), instead of `import keras`'
    )
    assert keras.__version__.startswith('3.')


def test_module_errors_name_the_file(tmp_path):
    missing = str(tmp_path / 'nowhere.py')
    with pytest.raises(ValueError, match=r"trainer.model_module: '.*nowhere.py' is not a file"):
        model_module.load_model_builder(missing)
    empty = _write_module(tmp_path, 'MODEL = 1\n')
    with pytest.raises(ValueError) as error:
        model_module.load_model_builder(empty)
    assert str(error.value) == (
        f'trainer.model_module ({empty}): defines no function build_model(features, config)'
    )


def test_example_module_loads_by_path():
    builder = model_module.load_model_builder(WIDE_MODEL)
    assert builder.__name__ == 'build_model'
