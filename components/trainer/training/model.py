"""The Keras model: an embedding per categorical feature and the numeric features, concatenated
and fed to a feed-forward tower that outputs one logit.

Built with tf.keras (tf_keras, Keras 2) because Keras 3 cannot train under
ParameterServerStrategy. Every layer is named after what it holds, so that two builds of the same
model (the sharded one trained on parameter servers and the plain one exported for serving, or a
warm-start source) line up variable by variable.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import tensorflow as tf

from components.trainer import config as config_lib

LOGITS = 'logits'


def embedding_width(rows: int, model_config: config_lib.ModelConfig) -> int:
    if not model_config.scale_embeddings:
        return model_config.embedding_dim
    return min(model_config.embedding_dim, int(math.ceil(6 * rows**0.25)))


def build_model(
    numeric_features: tuple[str, ...],
    categorical_features: Mapping[str, int],
    model_config: config_lib.ModelConfig,
    seed: int = 0,
) -> tf.keras.Model:
    """A model taking a dict of [batch] tensors and returning [batch, 1] logits.

    Args:
      numeric_features: float32 features, used as they are (Transform already scaled them).
      categorical_features: int64 id features and the number of ids each can take
        (int_domain.max + 1 in the transformed schema).
      model_config: Layer sizes.
      seed: Initializer seed.
    """
    if not tf.keras.__name__.startswith('tf_keras'):
        raise RuntimeError(
            f'tf.keras is {tf.keras.__name__} (Keras 3); ParameterServerStrategy training needs '
            'Keras 2: set TF_USE_LEGACY_KERAS=1 before TensorFlow is imported'
        )
    inputs = {}
    columns = []
    for name in sorted(numeric_features):
        inputs[name] = tf.keras.Input(shape=(), dtype=tf.float32, name=name)
        columns.append(tf.keras.layers.Reshape((1,), name=f'{name}_column')(inputs[name]))
    for name, rows in sorted(categorical_features.items()):
        inputs[name] = tf.keras.Input(shape=(), dtype=tf.int64, name=name)
        embedding = tf.keras.layers.Embedding(
            rows,
            embedding_width(rows, model_config),
            embeddings_initializer=tf.keras.initializers.RandomUniform(-0.05, 0.05, seed=seed),
            name=f'{name}_embedding',
        )
        columns.append(embedding(inputs[name]))
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
        1, kernel_initializer=tf.keras.initializers.GlorotUniform(seed=seed), name=LOGITS
    )(x)
    return tf.keras.Model(inputs=inputs, outputs=logits, name='asynctrain_model')
