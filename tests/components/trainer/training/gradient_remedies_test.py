"""The stale-gradient remedies on small tensors: Top-K with error feedback loses nothing over
steps and sends exactly k entries; DC-ASGD's gradient is the paper's formula, with a constant and
an adaptive lambda; a train step with each remedy applies what it says."""

import numpy as np
import pytest
import tensorflow as tf

from asynctrain.components.trainer.stale_gradients_config import StaleGradientsConfig
from asynctrain.components.trainer.training import gradient_remedies


def _integer_gradients(steps, shape, seed=0):
    # Small integers: every sum below is exact in float32, so equality can be exact.
    rng = np.random.default_rng(seed)
    return [rng.integers(-8, 9, size=shape).astype(np.float32) for _ in range(steps)]


def test_top_k_with_error_feedback_sums_back_to_the_dense_gradients():
    gradients = _integer_gradients(steps=7, shape=(4, 5))
    residual = tf.zeros((4, 5))
    sent_total = np.zeros((4, 5), np.float32)
    for gradient in gradients:
        update, residual = gradient_remedies.sparsify_top_k(
            tf.constant(gradient), residual, fraction=0.1
        )
        sent_total += update.to_dense().numpy()
    np.testing.assert_array_equal(sent_total + residual.numpy(), np.sum(gradients, axis=0))
    # Something was held back: the residual is what the sent entries did not carry yet.
    assert np.abs(residual.numpy()).sum() > 0


@pytest.mark.parametrize(
    ('shape', 'fraction', 'k'),
    [((4, 5), 0.1, 2), ((4, 5), 0.01, 1), ((300,), 0.01, 3), ((10, 10, 3), 0.1, 30)],
)
def test_top_k_sends_exactly_k_largest_entries_of_gradient_plus_residual(shape, fraction, k):
    # Distinct magnitudes, so the k largest are one set.
    size = int(np.prod(shape))
    rng = np.random.default_rng(1)
    entries = rng.permutation(np.arange(1, size + 1, dtype=np.float32)) * rng.choice([-1, 1], size)
    gradient = entries.reshape(shape).astype(np.float32)
    residual = np.zeros(shape, np.float32)
    residual.flat[0] = 1000.0  # the residual takes part in the choice
    update, new_residual = gradient_remedies.sparsify_top_k(
        tf.constant(gradient), tf.constant(residual), fraction
    )
    accumulated = gradient + residual
    assert update.values.shape == (k,) and update.indices.shape == (k, len(shape))
    assert update.indices.dtype == tf.int32
    largest = np.sort(np.abs(accumulated).ravel())[-k:]
    np.testing.assert_array_equal(np.sort(np.abs(update.values.numpy())), largest)
    np.testing.assert_array_equal(
        tf.gather_nd(accumulated, update.indices).numpy(), update.values.numpy()
    )
    assert accumulated.flat[0] in update.values.numpy()
    # Sent and kept partition the accumulated gradient.
    dense = update.to_dense().numpy()
    np.testing.assert_array_equal(dense + new_residual.numpy(), accumulated)
    assert np.count_nonzero(dense) == k and np.count_nonzero(new_residual.numpy()) == size - k
    assert update.nbytes == k * (4 + 4 * len(shape))
    assert int(gradient_remedies.gradient_bytes(update)) == update.nbytes
    assert int(gradient_remedies.gradient_bytes(tf.constant(gradient))) == size * 4


def test_top_k_count_rounds_the_fraction_and_sends_at_least_one():
    assert gradient_remedies.top_k_count(30, 0.1) == 3
    assert gradient_remedies.top_k_count(64 * 32, 0.01) == 20
    assert gradient_remedies.top_k_count(10, 0.01) == 1


def test_delay_compensation_is_the_formula_with_a_constant_lambda():
    g = tf.constant([[1.0, -2.0], [0.5, 0.0]])
    w_now = tf.constant([[1.0, 1.0], [2.0, 3.0]])
    w_read = tf.constant([[0.5, 2.0], [2.0, 1.0]])
    compensated = gradient_remedies.compensate_delay(g, w_now, w_read, 0.5)
    # g + 0.5 * g * g * (w_now - w_read), entry by entry.
    expected = [[1.0 + 0.5 * 1 * 0.5, -2.0 + 0.5 * 4 * -1.0], [0.5 + 0.0, 0.0]]
    np.testing.assert_allclose(compensated.numpy(), expected, rtol=0, atol=1e-7)


def test_delay_compensation_with_the_adaptive_lambda():
    g1 = np.array([2.0, -1.0, 0.0], np.float32)
    g2 = np.array([1.0, 3.0, 0.0], np.float32)
    lambda0, m = 2.0, 0.9
    lam1, ms1 = gradient_remedies.adaptive_delay_lambda(tf.constant(g1), tf.zeros(3), lambda0, m)
    np.testing.assert_allclose(ms1.numpy(), 0.1 * g1**2, rtol=1e-6)
    lam2, ms2 = gradient_remedies.adaptive_delay_lambda(tf.constant(g2), ms1, lambda0, m)
    mean_square = 0.9 * 0.1 * g1**2 + 0.1 * g2**2
    np.testing.assert_allclose(ms2.numpy(), mean_square, rtol=1e-6)
    np.testing.assert_allclose(
        lam2.numpy(), lambda0 / np.sqrt(mean_square + gradient_remedies.EPSILON), rtol=1e-6
    )
    delta = np.array([0.5, -0.25, 4.0], np.float32)
    compensated = gradient_remedies.compensate_delay(
        tf.constant(g2), tf.constant(delta), tf.zeros(3), lam2
    )
    expected = g2 + lambda0 / np.sqrt(mean_square + 1e-7) * g2 * g2 * delta
    np.testing.assert_allclose(compensated.numpy(), expected, rtol=1e-6)
    # An entry whose gradients were all zero stays zero, not NaN.
    assert compensated.numpy()[2] == 0.0


class _Tiny(tf.keras.Model):
    """An embedding (sparse gradients) and a dense kernel and bias."""

    def __init__(self):
        super().__init__()
        self.embedding = tf.keras.layers.Embedding(5, 2, embeddings_initializer='ones')
        self.dense = tf.keras.layers.Dense(1, kernel_initializer='ones')

    def call(self, inputs):
        return self.dense(self.embedding(inputs['id']) + inputs['x'])


def _tiny_model():
    model = _Tiny()
    model({'id': tf.constant([0]), 'x': tf.zeros([1, 2])})
    return model


def test_remedies_leave_embeddings_alone_and_keep_state_per_dense_variable():
    model = _tiny_model()
    settings = StaleGradientsConfig(top_k_fraction=0.5, delay_compensation='adaptive')
    remedies = gradient_remedies.GradientRemedies(settings, model)
    names = [v.name for v in model.trainable_variables]
    assert remedies.dense == ['embedding' not in n for n in names]
    # Residuals for the kernel and bias, mean squares too; none for the embedding table.
    assert [r is not None for r in remedies.residuals] == remedies.dense
    assert [m is not None for m in remedies.mean_squares] == remedies.dense


def test_apply_sends_k_entries_of_dense_gradients_and_counts_the_step():
    model = _tiny_model()
    optimizer = tf.keras.optimizers.SGD(learning_rate=0.5)
    optimizer.build(model.trainable_variables)
    settings = StaleGradientsConfig(top_k_fraction=0.5)
    remedies = gradient_remedies.GradientRemedies(settings, model)
    variables = model.trainable_variables
    kernel_index = next(i for i, v in enumerate(variables) if 'kernel' in v.name)
    before = [v.numpy().copy() for v in variables]
    gradients = []
    for v in variables:
        if 'embedding' in v.name:
            rows = tf.IndexedSlices(tf.ones([1, 2]), tf.constant([3]), tf.constant([5, 2]))
            gradients.append(rows)
        elif 'kernel' in v.name:
            gradients.append(tf.constant([[4.0], [-1.0]]))
        else:
            gradients.append(tf.constant([2.0]))
    sent, dense = remedies.apply(gradients, variables, optimizer)
    assert int(optimizer.iterations) == 1
    # The kernel sends its larger entry only; the smaller waits in the residual.
    np.testing.assert_array_equal(
        variables[kernel_index].numpy(), before[kernel_index] - 0.5 * np.array([[4.0], [0.0]])
    )
    np.testing.assert_array_equal(remedies.residuals[kernel_index].numpy(), [[0.0], [-1.0]])
    # Embedding: 2 values and 1 index of 4 bytes each, sent as is; kernel: 1 value and 2
    # indices; bias (one entry, k = 1): 1 value and 1 index.
    assert int(sent) == (2 * 4 + 4) + (4 + 2 * 4) + (4 + 4)
    assert int(dense) == (2 * 4 + 4) + 2 * 4 + 4
