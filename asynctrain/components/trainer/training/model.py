"""The built-in Keras model, and what every model (built-in or a user's `model_module`) is given.

A model takes the dict of transformed features (raw names as keys, label excluded) and returns
the task's logits, [batch, num_outputs]. The built-in one embeds each categorical feature,
concatenates the numeric features, and feeds them to a feed-forward tower.

Built with tf.keras (tf_keras, Keras 2) because Keras 3 cannot train under
ParameterServerStrategy. Every layer is named after what it holds, so that two builds of the same
model (the sharded one trained on parameter servers and the plain one exported for serving, or a
warm-start source) line up variable by variable. Feature names may hold spaces or parentheses
(`Culmen Length (mm)`), which Keras refuses in layer names: `layer_names` makes valid, stable,
unique ones, and the inputs' dict keys stay the raw names.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping

import tensorflow as tf

from asynctrain.components.trainer import config as config_lib

LOGITS = 'logits'

# Characters TensorFlow accepts in a name scope (a layer's name), beyond the first.
_INVALID_NAME_CHARACTERS = re.compile(r'[^A-Za-z0-9_.\-]')


@dataclasses.dataclass(frozen=True)
class ModelFeatures:
    """What `build_model(features, config)` is told about its inputs and output.

    Attributes:
      numeric: Names of the float32 transformed features, each [batch].
      categorical: Names of the int64 id features, each [batch], with the number of ids each can
        take (ids lie in [0, rows); int_domain.max + 1 in the transformed schema).
      label_key: The transformed label (not among the model's inputs).
      task_type: One of `shared.tasks.TASK_TYPES`.
      num_outputs: Width of the logits the model must return: [batch, num_outputs].
    """

    numeric: tuple[str, ...]
    categorical: Mapping[str, int]
    label_key: str
    task_type: str
    num_outputs: int

    @property
    def names(self) -> tuple[str, ...]:
        """Every input feature, sorted."""
        return tuple(sorted((*self.numeric, *self.categorical)))


def layer_names(feature_names: Iterable[str]) -> dict[str, str]:
    """A valid Keras layer name for each feature name, the same on every build.

    Invalid characters become `_`; a name that would collide with another gets a numeric suffix
    (assigned in sorted order, so it is stable).
    """
    names: dict[str, str] = {}
    used: set[str] = set()
    for feature in sorted(feature_names):
        base = _INVALID_NAME_CHARACTERS.sub('_', feature)
        if not base or not (base[0].isalnum() or base[0] == '.'):
            base = f'f{base}'
        name, suffix = base, 2
        while name in used:
            name, suffix = f'{base}_{suffix}', suffix + 1
        used.add(name)
        names[feature] = name
    return names


def feature_inputs(features: ModelFeatures) -> dict[str, tf.keras.Input]:
    """One Keras Input per transformed feature, keyed by the raw feature name: float32 for the
    numeric ones, int64 for the categorical ones, each of shape [batch]. A user's `build_model`
    can start from these."""
    names = layer_names(features.names)
    inputs = {}
    for feature in features.names:
        dtype = tf.int64 if feature in features.categorical else tf.float32
        inputs[feature] = tf.keras.Input(shape=(), dtype=dtype, name=names[feature])
    return inputs


def embedding_width(rows: int, model_config: config_lib.ModelConfig) -> int:
    if not model_config.scale_embeddings:
        return model_config.embedding_dim
    return min(model_config.embedding_dim, int(math.ceil(6 * rows**0.25)))


def check_keras_2() -> None:
    if not tf.keras.__name__.startswith('tf_keras'):
        raise RuntimeError(
            f'tf.keras is {tf.keras.__name__} (Keras 3); ParameterServerStrategy training needs '
            'Keras 2: set TF_USE_LEGACY_KERAS=1 before TensorFlow is imported'
        )


def build_model(features: ModelFeatures, config: config_lib.TrainerConfig) -> tf.keras.Model:
    """The built-in model: the same signature as a user's `model_module.build_model`.

    Numeric features are used as they are (Transform already scaled them); each categorical
    feature gets an embedding table of `rows` rows; `config.model` sizes the tower and
    `config.training.seed` seeds the initializers. Returns [batch, features.num_outputs] logits.
    """
    check_keras_2()
    model_config = config.model
    seed = config.training.seed
    inputs = feature_inputs(features)
    names = layer_names(features.names)
    columns = []
    for feature in sorted(features.numeric):
        reshape = tf.keras.layers.Reshape((1,), name=f'{names[feature]}_column')
        columns.append(reshape(inputs[feature]))
    for feature, rows in sorted(features.categorical.items()):
        embedding = tf.keras.layers.Embedding(
            rows,
            embedding_width(rows, model_config),
            embeddings_initializer=tf.keras.initializers.RandomUniform(-0.05, 0.05, seed=seed),
            name=f'{names[feature]}_embedding',
        )
        columns.append(embedding(inputs[feature]))
    x = tf.keras.layers.Concatenate(name='features')(columns)
    for i, units in enumerate(model_config.hidden_units):
        x = tf.keras.layers.Dense(
            units,
            activation='relu',
            kernel_initializer=tf.keras.initializers.GlorotUniform(seed=seed + i + 1),
            name=f'hidden_{i}',
        )(x)
        if model_config.dropout:
            x = tf.keras.layers.Dropout(model_config.dropout, name=f'dropout_{i}')(x)
    logits = tf.keras.layers.Dense(
        features.num_outputs,
        kernel_initializer=tf.keras.initializers.GlorotUniform(seed=seed),
        name=LOGITS,
    )(x)
    return tf.keras.Model(inputs=inputs, outputs=logits, name='asynctrain_model')
