"""The built-in model and the model inputs: valid layer names for any feature name, one input
per feature keyed by its raw name, embedding widths, and the head's width per task."""

import numpy as np
import tensorflow as tf

from asynctrain.components.trainer import config as config_lib
from asynctrain.components.trainer.training import model

FEATURES = model.ModelFeatures(
    numeric=('Culmen Length (mm)', 'fare'),
    categorical={'Island': 3, 'company': 10_000},
    label_key='Species',
    task_type='multiclass',
    num_outputs=4,
)


def test_layer_names_are_valid_stable_and_unique():
    names = model.layer_names(['Culmen Length (mm)', 'Culmen_Length__mm_', '_x', 'fare'])
    assert names == {
        'Culmen Length (mm)': 'Culmen_Length__mm_',
        'Culmen_Length__mm_': 'Culmen_Length__mm__2',
        '_x': 'f_x',
        'fare': 'fare',
    }


def test_built_in_model_layers_and_output_width():
    config = config_lib.TrainerConfig(
        model=config_lib.ModelConfig(hidden_units=(16, 8), embedding_dim=8, scale_embeddings=True)
    )
    keras_model = model.build_model(FEATURES, config)
    assert sorted(keras_model.input) == ['Culmen Length (mm)', 'Island', 'company', 'fare']
    assert keras_model.output_shape == (None, 4)
    # min(8, ceil(6 * rows ** 0.25)): 3 ids -> 8 (7.9 rounds up), 10,000 ids -> 8; unscaled 8.
    assert keras_model.get_layer('Island_embedding').output_dim == 8
    assert model.embedding_width(3, config.model) == 8
    assert (
        model.embedding_width(16, config_lib.ModelConfig(embedding_dim=64, scale_embeddings=True))
        == 12
    )
    assert keras_model.get_layer('company_embedding').input_dim == 10_000
    assert keras_model.get_layer('Culmen_Length__mm__column') is not None
    assert [keras_model.get_layer(f'hidden_{i}').units for i in range(2)] == [16, 8]
    # 2 numeric + 2 embeddings of 8 feed the tower.
    assert keras_model.get_layer('hidden_0').kernel.shape == (2 + 8 + 8, 16)
    logits = keras_model(
        {
            'Culmen Length (mm)': tf.constant([0.5, -1.0]),
            'fare': tf.constant([1.0, 2.0]),
            'Island': tf.constant([0, 2], tf.int64),
            'company': tf.constant([9999, 3], tf.int64),
        }
    )
    assert logits.shape == (2, 4) and np.isfinite(logits.numpy()).all()


def test_two_builds_name_their_weights_alike():
    config = config_lib.TrainerConfig()
    first = model.build_model(FEATURES, config)
    second = model.build_model(FEATURES, config)
    assert [w.name for w in first.weights] == [w.name for w in second.weights]
    for a, b in zip(first.weights, second.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())  # seeded initializers
