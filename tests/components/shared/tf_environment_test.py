"""The process environment: the variables set before TensorFlow loads, AutoGraph leaving
tf-keras' own code unconverted while still converting a model's own `call`, and the `s3://`
filesystem registered on the line that has one and refused with the reason on the other."""

import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.autograph.core import config
from tensorflow.python.autograph.impl import conversion

from asynctrain.components.shared import tf_environment
from tests.repository import child_environment


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


def test_values_without_an_s3_uri_register_nothing():
    assert tf_environment.register_filesystems(['/data/x.csv', 'gs://b/k', '--steps=3']) is False


@pytest.mark.only_line('tfx116', "tensorflow-io, TensorFlow's s3:// filesystem, exists for TF 2.16")
def test_an_s3_uri_registers_tensorflows_s3_filesystem():
    # In a child that leaves with os._exit: tensorflow-io's filesystem aborts the interpreter at
    # exit, which would end this test process.
    code = (
        'import os, sys\n'
        'import tensorflow as tf\n'
        'from asynctrain.components.shared import tf_environment\n'
        "registered = tf_environment.register_filesystems(['--data=s3://b/k'])\n"
        "print(registered, 's3' in tf.io.gfile.get_registered_schemes())\n"
        'sys.stdout.flush()\n'
        'os._exit(0)\n'
    )
    done = subprocess.run(
        [sys.executable, '-c', code],
        env=child_environment(),
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert done.stdout.split() == ['True', 'True'], done.stderr[-2000:]


@pytest.mark.only_line(
    'tfx121', 'TensorFlow 2.21 has no s3:// filesystem (no tensorflow-io for it)'
)
def test_an_s3_uri_is_refused_with_the_reason_where_tensorflow_cannot_open_it():
    with pytest.raises(
        ValueError, match=r'on the TFX 1\.21 line TensorFlow has no s3:// filesystem'
    ):
        tf_environment.register_filesystems(['--data=s3://b/k'])
