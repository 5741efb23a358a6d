"""A user's own model: `trainer.model_module`, a Python file defining `build_model(features,
config)`, loaded by path as Transform loads a `preprocessing_module`.

`build_model` receives a `model.ModelFeatures` (numeric names; categorical names with their
number of ids; the label; the task type; the number of outputs) and the `TrainerConfig`, and
returns a tf.keras model from the dict of transformed features to the task's logits. The loop
calls it inside `strategy.scope()`, so its variables are sharded over the parameter servers like
the built-in model's; `model.feature_inputs` gives it ready-made, validly named inputs.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable

import tensorflow as tf

from asynctrain.components.trainer import config as config_lib
from asynctrain.components.trainer.training import model as model_lib

BUILD_MODEL = 'build_model'

ModelBuilder = Callable[[model_lib.ModelFeatures, config_lib.TrainerConfig], tf.keras.Model]


def load_model_builder(path: str) -> ModelBuilder:
    """`build_model` of the file at `path` (relative paths resolve against the working
    directory). Raises a ValueError naming `trainer.model_module` and the file when the file is
    missing or defines no callable `build_model`."""
    if not os.path.isfile(path):
        raise ValueError(
            f'trainer.model_module: {path!r} is not a file '
            f'(working directory {os.getcwd()}); expected a Python file defining '
            f'{BUILD_MODEL}(features, config)'
        )
    # A name of its own, so that two different files never share a cached module.
    module_name = f'asynctrain_model_module_{abs(hash(os.path.abspath(path)))}'
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ValueError(f'trainer.model_module: {path!r} cannot be imported as a Python module')
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    builder = getattr(module, BUILD_MODEL, None)
    if not callable(builder):
        raise ValueError(
            f'trainer.model_module ({path}): defines no function {BUILD_MODEL}(features, config)'
        )
    return builder


def model_builder(config: config_lib.TrainerConfig) -> ModelBuilder:
    """The user's `build_model` when `config.model_module` names one, else the built-in one."""
    if config.model_module:
        return load_model_builder(config.model_module)
    return model_lib.build_model


def check_output_shape(
    keras_model: tf.keras.Model,
    num_outputs: int,
    sample_features: dict,
    config: config_lib.TrainerConfig,
    what: str,
) -> None:
    """Raises a ValueError naming the expected shape unless `keras_model` returns
    [batch, num_outputs]; `what` names the task, as in 'the multiclass task with 4 classes'.

    A functional model states its output shape; any other is called once on `sample_features`
    (a batch of zeros of the transformed features).
    """
    source = f'trainer.model_module ({config.model_module})' if config.model_module else 'model'
    if not isinstance(keras_model, tf.keras.Model):
        raise ValueError(_not_keras_2(keras_model, source))
    try:
        shape = tuple(tf.TensorShape(keras_model.output_shape).as_list())
    except (AttributeError, RuntimeError, TypeError, ValueError):
        # A subclassed model has no static output shape until it is called.
        shape = (None, *keras_model(sample_features, training=False).shape.as_list()[1:])
    expected = (None, num_outputs)
    if shape != expected:
        raise ValueError(
            f'{source}: {BUILD_MODEL} returned output shape {shape}; {what} expects {expected}'
        )


def _not_keras_2(keras_model, source: str) -> str:
    """Why a model that is not a tf.keras (Keras 2) model is refused, and what to change.

    A Keras 3 model (`import keras`, the `keras` that TensorFlow 2.16+ installs) cannot train
    under ParameterServerStrategy on either line: Keras 3 does not support parameter-server
    training (keras-team/keras#18624), its layers fail on the sharded variables the embedding
    tables are split into ('ShardedVariable' object has no attribute 'handle'), and a Keras 2
    optimizer cannot build on its variables (docs/support.md, "Keras")."""
    kind = type(keras_model)
    if kind.__module__.split('.')[0] == 'keras':
        keras_version = getattr(sys.modules.get('keras'), '__version__', '3')
        return (
            f'{source}: {BUILD_MODEL} returned a Keras 3 model ({kind.__name__}, keras '
            f'{keras_version}); asynctrain trains under ParameterServerStrategy, which Keras 3 '
            'does not support. Build it with Keras 2: `import tf_keras as keras`, or '
            '`tf.keras` (asynctrain sets TF_USE_LEGACY_KERAS=1), instead of `import keras`'
        )
    return (
        f'{source}: {BUILD_MODEL} returned {kind.__name__}; expected a tf.keras.Model '
        '(Keras 2: tf_keras)'
    )
