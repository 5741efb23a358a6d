"""Remedies for stale gradients in asynchronous training, as one worker applies them: Top-K
sparsification with error feedback, and delay compensation (DC-ASGD). Both are off by default
(`trainer.stale_gradients`) until a bench has measured them.

Pure functions on tensors come first (`sparsify_top_k`, `compensate_delay`,
`adaptive_delay_lambda`, `gradient_bytes`), then `GradientRemedies`, which holds what a worker
keeps between its steps (residuals, mean squares) and which `task.Task.train_step` calls.

Which variables: the dense ones, that is plain (unsharded) variables outside Keras `Embedding`
layers. Embedding gradients already cross the wire as `IndexedSlices` of the rows a batch used,
and a `ShardedVariable` takes no element-wise scatter; both are sent as they are.

Worker-local state: residuals and mean squares are `per_worker_variable`s of
`ParameterServerStrategy`, one copy on each worker, never on a parameter server and never
checkpointed (a restarted worker starts again from zero residuals, which loses at most the
entries it had not sent yet). Outside a `ParameterServerStrategy` (tests, a single process)
they are plain local variables.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import tensorflow as tf

from asynctrain.components.trainer.stale_gradients_config import StaleGradientsConfig

# Added to the mean square under the square root of the adaptive lambda: an entry whose gradients
# were all zero gets a finite lambda (its compensation, g * g * delta, is zero anyway).
EPSILON = 1e-7


@dataclasses.dataclass(frozen=True)
class SparseUpdate:
    """The k entries of a gradient that are sent, as `tf.scatter_nd` takes them.

    Attributes:
      indices: [k, rank] int32, each row the position of one entry in the variable.
      values: [k], the entries.
      shape: The variable's (static) shape.
    """

    indices: tf.Tensor
    values: tf.Tensor
    shape: tf.TensorShape

    @property
    def nbytes(self) -> int:
        """Bytes that cross the wire: k values and k index rows."""
        k = int(self.values.shape[0])
        return k * (self.values.dtype.size + self.indices.dtype.size * self.shape.rank)

    def to_dense(self) -> tf.Tensor:
        return tf.scatter_nd(self.indices, self.values, self.shape)


def top_k_count(num_entries: int, fraction: float) -> int:
    """k for a variable of `num_entries` entries: round(fraction * entries), at least 1."""
    return max(1, min(num_entries, round(fraction * num_entries)))


def sparsify_top_k(
    gradient: tf.Tensor, residual: tf.Tensor, fraction: float
) -> tuple[SparseUpdate, tf.Tensor]:
    """Top-K sparsification with error feedback (Stich et al., NeurIPS 2018, "Sparsified SGD with
    memory"; Lin et al., ICLR 2018, "Deep Gradient Compression").

    The residual is added to the gradient, the k largest-magnitude entries of the sum are sent,
    and the rest is the new residual: sent + new residual == gradient + residual exactly (each
    entry is copied to one side and zeroed on the other), so over steps nothing is lost, only
    delayed.

    Returns:
      The update to send, and the new residual (the shape of `gradient`).
    """
    accumulated = gradient + residual
    flat = tf.reshape(accumulated, [-1])
    k = top_k_count(accumulated.shape.num_elements(), fraction)
    _, flat_indices = tf.math.top_k(tf.abs(flat), k=k, sorted=False)
    values = tf.gather(flat, flat_indices)
    kept = tf.tensor_scatter_nd_update(flat, flat_indices[:, None], tf.zeros_like(values))
    indices = tf.transpose(tf.unravel_index(flat_indices, accumulated.shape.as_list()))
    update = SparseUpdate(tf.cast(indices, tf.int32), values, accumulated.shape)
    return update, tf.reshape(kept, accumulated.shape)


def compensate_delay(
    gradient: tf.Tensor,
    weights_now: tf.Tensor,
    weights_read: tf.Tensor,
    delay_lambda: tf.Tensor | float,
) -> tf.Tensor:
    """DC-ASGD's delay-compensated gradient (Zheng et al., ICML 2017, "Asynchronous Stochastic
    Gradient Descent with Delay Compensation", the update rule of DC-ASGD):

        g_comp = g + lambda * g * g * (w_now - w_read)

    elementwise: g * g is the paper's cheap approximation of the Hessian's diagonal, so the
    gradient computed at the weights `w_read` that the forward pass read is moved towards the
    gradient at `w_now`, the weights it will be applied to.
    """
    return gradient + delay_lambda * gradient * gradient * (weights_now - weights_read)


def adaptive_delay_lambda(
    gradient: tf.Tensor, mean_square: tf.Tensor, lambda0: float, momentum: float
) -> tuple[tf.Tensor, tf.Tensor]:
    """DC-ASGD-a's lambda (Zheng et al., ICML 2017, section 5):

        MeanSquare(t) = m * MeanSquare(t-1) + (1 - m) * g_t * g_t
        lambda_t = lambda0 / sqrt(MeanSquare(t))

    elementwise, a moving average of the squared gradient per entry of the variable (the paper
    keeps it on the parameter server; here each worker keeps its own). `EPSILON` is added under
    the square root.

    Returns:
      lambda_t (the gradient's shape) and MeanSquare(t).
    """
    mean_square = momentum * mean_square + (1.0 - momentum) * tf.square(gradient)
    return lambda0 / tf.sqrt(mean_square + EPSILON), mean_square


def gradient_bytes(gradient) -> tf.Tensor:
    """Bytes a gradient puts on the wire to the parameter servers (int64): every entry of a dense
    one; values and indices of `IndexedSlices` or a `SparseUpdate`; 0 for None."""
    if gradient is None:
        return tf.constant(0, tf.int64)
    if isinstance(gradient, SparseUpdate):
        return tf.constant(gradient.nbytes, tf.int64)
    if isinstance(gradient, tf.IndexedSlices):
        values = tf.size(gradient.values, tf.int64) * gradient.values.dtype.size
        return values + tf.size(gradient.indices, tf.int64) * gradient.indices.dtype.size
    return tf.size(gradient, tf.int64) * gradient.dtype.size


def _read_after(state: tf.Variable, gradient: tf.Tensor) -> tf.Tensor:
    """Reads worker state once this step's gradient exists. `PerWorkerVariable`s are outside
    automatic control dependencies (`ps_values.PerWorkerVariable`'s caveats), so a step's read
    and update are ordered by hand: the read waits for the gradient, which waits for the step's
    input, which the loop fetches after the previous step's result, which waits for the update."""
    with tf.control_dependencies([gradient]):
        return state.read_value()


def _worker_variable(like: tf.Variable, name: str) -> tf.Variable:
    """A zero variable shaped as `like`: one per worker under a `ParameterServerStrategy` (created
    in its scope), else a plain local one."""
    placement = {}
    if isinstance(tf.distribute.get_strategy(), tf.distribute.experimental.ParameterServerStrategy):
        placement['per_worker_variable'] = True
    return tf.Variable(tf.zeros(like.shape, like.dtype), trainable=False, name=name, **placement)


def dense_variable_flags(keras_model: tf.keras.Model) -> list[bool]:
    """For each trainable variable of the model: whether the remedies apply to it (a plain
    variable outside an `Embedding` layer)."""
    embedding = {
        id(weight)
        for layer in keras_model.submodules
        if isinstance(layer, tf.keras.layers.Embedding)
        for weight in layer.weights
    }
    return [
        isinstance(v, tf.Variable) and id(v) not in embedding
        for v in keras_model.trainable_variables
    ]


class GradientRemedies:
    """What one worker does to its gradients before they reach the parameter servers, per
    `trainer.stale_gradients`, and the state it keeps for that between steps.

    Construct it in the strategy's scope, after the model is built; `train_step` calls
    `read_weights` before the forward pass, `compensate` on the gradients, then `apply`.
    """

    def __init__(self, settings: StaleGradientsConfig, keras_model: tf.keras.Model):
        self.settings = settings
        variables = keras_model.trainable_variables
        self.dense = dense_variable_flags(keras_model)
        top_k = settings.top_k_fraction > 0
        adaptive = settings.delay_compensation == 'adaptive'
        self.residuals = [
            _worker_variable(v, f'top_k_residual_{i}') if top_k and dense and v.shape.rank else None
            for i, (v, dense) in enumerate(zip(variables, self.dense))
        ]
        self.mean_squares = [
            _worker_variable(v, f'delay_mean_square_{i}') if adaptive and dense else None
            for i, (v, dense) in enumerate(zip(variables, self.dense))
        ]

    @property
    def worker_variables(self) -> list[tf.Variable]:
        """The state each worker keeps: residuals and mean squares."""
        return [v for v in self.residuals + self.mean_squares if v is not None]

    @property
    def compensates_delay(self) -> bool:
        return self.settings.delay_compensation != 'off'

    def read_weights(self, variables: Sequence[tf.Variable]) -> list[tf.Tensor | None]:
        """The weights the forward pass is about to read (None where no compensation applies).
        An explicit read, taken with the step counter's: the forward pass reads again, and an
        update landing between the two reads goes uncompensated."""
        if not self.compensates_delay:
            return [None] * len(variables)
        return [
            tf.identity(v.read_value()) if dense else None
            for v, dense in zip(variables, self.dense)
        ]

    def compensate(
        self,
        gradients: Sequence,
        variables: Sequence[tf.Variable],
        weights_read: Sequence[tf.Tensor | None],
    ) -> list:
        """DC-ASGD on every dense gradient whose weights were read; the rest as they are."""
        compensated = []
        for gradient, variable, read, mean_square in zip(
            gradients, variables, weights_read, self.mean_squares
        ):
            if read is None or gradient is None or isinstance(gradient, tf.IndexedSlices):
                compensated.append(gradient)
                continue
            # A fresh read of the parameter server's copy, once the gradient is known.
            with tf.control_dependencies([gradient]):
                weights_now = variable.read_value()
            delay_lambda = self.settings.delay_compensation_lambda
            updates = []
            if mean_square is not None:
                delay_lambda, updated = adaptive_delay_lambda(
                    gradient,
                    _read_after(mean_square, gradient),
                    delay_lambda,
                    self.settings.delay_compensation_momentum,
                )
                updates.append(mean_square.assign(updated))
            # The compensated gradient carries the state's update with it (see `_read_after`).
            with tf.control_dependencies(updates):
                compensated.append(
                    tf.identity(compensate_delay(gradient, weights_now, read, delay_lambda))
                )
        return compensated

    def apply(
        self,
        gradients: Sequence,
        variables: Sequence[tf.Variable],
        optimizer: tf.keras.optimizers.Optimizer,
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """Applies the gradients: Top-K ones as a scatter of their k entries (plain SGD: the
        variable minus learning rate times the entries), the rest through the optimizer, which
        also counts the step.

        Returns:
          Bytes sent to the parameter servers, and the bytes the same gradients take dense
          (int64 scalars; equal when Top-K is off).
        """
        dense_bytes = tf.add_n([tf.constant(0, tf.int64)] + [gradient_bytes(g) for g in gradients])
        through_optimizer, sparse_updates, sent = [], [], [tf.constant(0, tf.int64)]
        state_updates = []
        for gradient, variable, residual in zip(gradients, variables, self.residuals):
            if gradient is None:
                continue
            if residual is None or isinstance(gradient, tf.IndexedSlices):
                through_optimizer.append((gradient, variable))
                sent.append(gradient_bytes(gradient))
                continue
            update, new_residual = sparsify_top_k(
                gradient, _read_after(residual, gradient), self.settings.top_k_fraction
            )
            state_updates.append(residual.assign(new_residual))
            sparse_updates.append((update, variable))
            sent.append(gradient_bytes(update))
        if through_optimizer:
            optimizer.apply_gradients(through_optimizer)
        else:
            optimizer.iterations.assign_add(1)
        for update, variable in sparse_updates:
            learning_rate = tf.cast(optimizer.learning_rate, update.values.dtype)
            variable.scatter_nd_sub(update.indices, learning_rate * update.values)
        # The step's result depends on the residuals' updates, and the loop starts the next step
        # after this one's result (see `_read_after`).
        with tf.control_dependencies(state_updates + [g for g in gradients if g is not None]):
            return tf.identity(tf.add_n(sent)), dense_bytes
