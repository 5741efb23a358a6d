"""An example `trainer.model_module`: a wide-and-deep model.

Point the pipeline config at it (`trainer: {model_module: examples/model_module/wide_model.py}`).
The Trainer calls `build_model(features, config)` inside its ParameterServerStrategy scope, so
the variables made here are sharded over the parameter servers like the built-in model's; it
checks the output against the task before training: [batch, features.num_outputs] logits
(1 for binary and regression, one per class for multiclass).

The wide part is linear in the one-hot categorical features; the deep part embeds them and
feeds them, with the numeric features, to a small tower. Layers are named, so that the sharded
training build, the exported build and a warm-start source line up weight by weight.
"""

from __future__ import annotations

import tensorflow as tf

from asynctrain.components.trainer import config as config_lib
from asynctrain.components.trainer.training import model as model_lib

DEEP_UNITS = (32, 16)
EMBEDDING_DIM = 4


def build_model(
    features: model_lib.ModelFeatures, config: config_lib.TrainerConfig
) -> tf.keras.Model:
    """[batch] transformed features (a dict keyed by their names) -> [batch, num_outputs]."""
    inputs = model_lib.feature_inputs(features)  # valid layer names, raw names as keys
    names = model_lib.layer_names(features.names)
    seed = config.training.seed
    numeric = [
        tf.keras.layers.Reshape((1,), name=f'{names[f]}_column')(inputs[f])
        for f in sorted(features.numeric)
    ]
    wide, deep = list(numeric), list(numeric)
    for feature, rows in sorted(features.categorical.items()):
        one_hot = tf.keras.layers.CategoryEncoding(
            rows, output_mode='one_hot', name=f'{names[feature]}_one_hot'
        )
        wide.append(one_hot(inputs[feature]))
        embedding = tf.keras.layers.Embedding(
            rows, EMBEDDING_DIM, name=f'{names[feature]}_embedding'
        )
        deep.append(embedding(inputs[feature]))
    x = tf.keras.layers.Concatenate(name='deep_features')(deep)
    for i, units in enumerate(DEEP_UNITS):
        x = tf.keras.layers.Dense(
            units,
            activation='relu',
            kernel_initializer=tf.keras.initializers.GlorotUniform(seed=seed + i),
            name=f'deep_{i}',
        )(x)
    wide_features = tf.keras.layers.Concatenate(name='wide_features')(wide)
    logits = tf.keras.layers.Add(name='logits')(
        [
            tf.keras.layers.Dense(features.num_outputs, name='wide_logits')(wide_features),
            tf.keras.layers.Dense(features.num_outputs, name='deep_logits')(x),
        ]
    )
    return tf.keras.Model(inputs=inputs, outputs=logits, name='wide_and_deep')
