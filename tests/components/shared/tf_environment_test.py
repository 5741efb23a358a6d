"""The process environment: the variables set before TensorFlow loads, and AutoGraph leaving
tf-keras' own code unconverted while still converting a model's own `call`."""

import numpy as np
import tensorflow as tf
from tensorflow.python.autograph.core import config
from tensorflow.python.autograph.impl import conversion

from asynctrain.components.shared import tf_environment


def test_configure_sets_unset_variables_and_keeps_the_users():
    environ = {'GRPC_FAIL_FAST': 'false'}

    tf_environment.configure(environ)

    assert environ == {'TF_USE_LEGACY_KERAS': '1', 'GRPC_FAIL_FAST': 'false'}


class _SignFlip(tf.keras.layers.Layer):
    """A user's layer with Python control flow on a tensor: only AutoGraph makes it traceable."""

    def call(self, inputs):
        if tf.reduce_sum(inputs) > 0:
            return -inputs
        return inputs * 2.0


def test_keras_code_is_left_unconverted_and_a_users_layer_is_still_converted():
    tf_environment.configure_autograph()
    tf_environment.configure_autograph()  # Idempotent: one rule, not two.

    prefixes = [getattr(rule, '_prefix', None) for rule in config.CONVERSION_RULES]
    assert prefixes.count('tf_keras') == 1
    assert conversion.is_allowlisted(tf.keras.layers.Dense(1).__call__)
    assert conversion.is_allowlisted(tf.keras.optimizers.Adam().apply_gradients)
    assert not conversion.is_allowlisted(_SignFlip.call)

    inputs = tf.keras.Input(shape=(2,))
    model = tf.keras.Model(inputs, _SignFlip()(tf.keras.layers.Dense(2, use_bias=False)(inputs)))
    model.layers[1].set_weights([np.eye(2, dtype=np.float32)])

    @tf.function
    def call(x):
        return model(x)

    np.testing.assert_allclose(call(tf.constant([[1.0, 2.0]])), [[-1.0, -2.0]])
    np.testing.assert_allclose(call(tf.constant([[-1.0, -2.0]])), [[-2.0, -4.0]])
