"""The single-replica view of training: the `Task` base, and what it knows of Transform's output.

A task owns what depends on the label: the model's head size, the loss, the metrics, and the
serving outputs. Everything else here (inputs, optimizer, one asynchronous train step, one eval
step) is shared. Nothing here knows about the strategy, the coordinator or checkpoints (that is
`loop`), as in TensorFlow Model Garden's `base_task.Task` versus its trainer: these are what one
worker runs, and a test can call them directly. The concrete tasks are in `tasks`.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping

import tensorflow as tf

from asynctrain.components.trainer import config as config_lib
from asynctrain.components.trainer.training import (
    data,
    gradient_remedies,
    gradient_statistics,
    model,
    model_module,
)


@dataclasses.dataclass(frozen=True)
class TransformedSchema:
    """What the Trainer needs to know about Transform's output.

    Attributes:
      feature_spec: Parse spec of a transformed tf.Example, label included (scalars only).
      categorical_rows: For each int64 id feature, the number of ids (int_domain.max + 1).
      label_key: The label's key in `feature_spec`.
    """

    feature_spec: Mapping[str, tf.io.FixedLenFeature]
    categorical_rows: Mapping[str, int]
    label_key: str

    @property
    def numeric_features(self) -> tuple[str, ...]:
        return tuple(
            sorted(
                name
                for name, spec in self.feature_spec.items()
                if name != self.label_key and spec.dtype == tf.float32
            )
        )


def load_transformed_schema(transform_graph_dir: str, label_key: str) -> TransformedSchema:
    """Reads the transformed feature spec and id ranges that Transform recorded."""
    import tensorflow_transform as tft

    tft_output = tft.TFTransformOutput(transform_graph_dir)
    feature_spec = tft_output.transformed_feature_spec()
    if label_key not in feature_spec:
        raise ValueError(
            f'label_key: {label_key!r} is not a transformed feature; '
            f'allowed: {sorted(feature_spec)}'
        )
    rows = {}
    for feature in tft_output.transformed_metadata.schema.feature:
        name = feature.name
        if name == label_key or name not in feature_spec:
            continue
        spec = feature_spec[name]
        if not isinstance(spec, tf.io.FixedLenFeature) or list(spec.shape) not in ([], [1]):
            raise ValueError(
                f'transformed feature {name!r}: expected a scalar per example, got {spec}'
            )
        if spec.dtype == tf.int64:
            if not feature.HasField('int_domain') or not feature.int_domain.HasField('max'):
                raise ValueError(
                    f'transformed feature {name!r}: an int64 feature needs an '
                    'int_domain with a max to size its embedding'
                )
            rows[name] = int(feature.int_domain.max) + 1
        elif spec.dtype != tf.float32:
            raise ValueError(f'transformed feature {name!r}: unsupported dtype {spec.dtype.name}')
    return TransformedSchema(feature_spec=feature_spec, categorical_rows=rows, label_key=label_key)


class Task(abc.ABC):
    """What is learned from the label, for one replica; the loop is given a Task and never asks
    which one.

    Subclasses set `task_type` and define `num_outputs`, `loss`, `update_metrics`,
    `build_metrics` and `serving_outputs`; `prepare` is where a task reads what it needs from the
    training data before training (the regression label's statistics).
    """

    task_type: str = ''

    def __init__(self, schema: TransformedSchema, trainer_config: config_lib.TrainerConfig):
        self.schema = schema
        self.config = trainer_config
        self._model_builder = model_module.model_builder(trainer_config)

    # What each task defines.

    @property
    @abc.abstractmethod
    def num_outputs(self) -> int:
        """Width of the model's output, [batch, num_outputs]."""

    @abc.abstractmethod
    def describe(self) -> str:
        """The task in words, for errors: 'the multiclass task with 4 classes'."""

    @abc.abstractmethod
    def loss(self, labels: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
        """The mean training loss of a batch (a scalar)."""

    @abc.abstractmethod
    def build_metrics(self) -> dict[str, tf.keras.metrics.Metric]:
        """Fresh eval metrics, by name; `loss` among them."""

    @abc.abstractmethod
    def update_metrics(
        self,
        labels: tf.Tensor,
        logits: tf.Tensor,
        metrics: Mapping[str, tf.keras.metrics.Metric],
    ) -> None:
        """Adds one eval batch to `metrics`."""

    @abc.abstractmethod
    def serving_outputs(self, logits: tf.Tensor) -> dict[str, tf.Tensor]:
        """The serving signature's outputs for a batch of logits (names from `export`)."""

    def prepare(self, examples_dir: str) -> None:
        """Reads what the task needs from the transformed training data; called by the loop
        before training and evaluation. Must be deterministic: every attempt calls it again.
        Most tasks need nothing."""
        del examples_dir

    # Shared by every task.

    @property
    def output_shape(self) -> tuple:
        return (None, self.num_outputs)

    @property
    def model_features(self) -> model.ModelFeatures:
        return model.ModelFeatures(
            numeric=self.schema.numeric_features,
            categorical=dict(self.schema.categorical_rows),
            label_key=self.schema.label_key,
            task_type=self.task_type,
            num_outputs=self.num_outputs,
        )

    @property
    def element_spec(self) -> tuple[dict, tf.TensorSpec]:
        return data.element_spec(self.schema.feature_spec, self.schema.label_key)

    def build_model(self) -> tf.keras.Model:
        """The model (built-in, or `trainer.model_module`'s), checked against the task's output
        shape: a wrong one fails here, before any training."""
        keras_model = self._model_builder(self.model_features, self.config)
        features_spec, _ = self.element_spec
        sample = {name: tf.zeros([2], spec.dtype) for name, spec in features_spec.items()}
        model_module.check_output_shape(
            keras_model, self.num_outputs, sample, self.config, self.describe()
        )
        return keras_model

    def build_optimizer(self) -> tf.keras.optimizers.Optimizer:
        training = self.config.training
        optimizers = {
            'adagrad': tf.keras.optimizers.Adagrad,
            'adam': tf.keras.optimizers.Adam,
            'sgd': tf.keras.optimizers.SGD,
        }
        return optimizers[training.optimizer](learning_rate=training.learning_rate)

    def build_inputs(
        self, examples_dir: str, split: str, training: bool, cache_path: str | None = None
    ) -> tf.data.Dataset:
        return data.make_dataset(
            data.split_file_pattern(examples_dir, split),
            self.schema.feature_spec,
            self.schema.label_key,
            self.config.training.batch_size,
            self.config.input,
            training=training,
            cache_path=cache_path,
        )

    def train_step(
        self,
        features: dict,
        labels: tf.Tensor,
        keras_model: tf.keras.Model,
        optimizer: tf.keras.optimizers.Optimizer,
        remedies: gradient_remedies.GradientRemedies | None = None,
        sample_gradients: tf.Tensor | None = None,
    ) -> dict:
        """One asynchronous update; returns its loss, staleness and the bytes its gradients put
        on the wire (`gradient_bytes`, and `dense_gradient_bytes` had they all been sent dense).
        With `sample_gradients` (a bool tensor), also `gradient_sample`: when it is true, the
        computed gradients' `gradient_statistics.sample` (histograms if
        `training.gradient_histograms`), zeros otherwise.

        Staleness is the number of updates (from any worker) applied to the parameter servers
        between this step's read of the step counter, taken with its read of the weights, and its
        own update. `remedies` (built by the loop when `trainer.stale_gradients` asks for any)
        compensate the gradients' delay and sparsify them before they are applied.
        """
        variables = keras_model.trainable_variables
        read_step = optimizer.iterations.read_value()
        weights_read = (
            remedies.read_weights(variables) if remedies is not None else [None] * len(variables)
        )
        with tf.control_dependencies([read_step] + [w for w in weights_read if w is not None]):
            with tf.GradientTape() as tape:
                logits = keras_model(features, training=True)
                loss = self.loss(labels, logits)
                if keras_model.losses:
                    loss += tf.add_n(keras_model.losses)
        gradients = tape.gradient(loss, variables)
        with tf.control_dependencies([g for g in gradients if g is not None]):
            applied_step = optimizer.iterations.read_value()
        outputs = {}
        if sample_gradients is not None:
            histograms = self.config.training.gradient_histograms
            size = gradient_statistics.layout_for(variables, histograms).size
            computed = list(gradients)
            outputs['gradient_sample'] = tf.cond(
                sample_gradients,
                lambda: gradient_statistics.sample(computed, histograms),
                lambda: tf.zeros([size], tf.float64),
            )
        staleness = applied_step - read_step
        if remedies is not None:
            gradients = remedies.compensate(gradients, variables, weights_read)
        if self.config.training.staleness_aware_learning_rate:
            scale = 1.0 / tf.maximum(tf.cast(staleness, tf.float32), 1.0)
            gradients = [None if g is None else _scale(g, scale) for g in gradients]
        if remedies is not None:
            sent_bytes, dense_bytes = remedies.apply(gradients, variables, optimizer)
        else:
            optimizer.apply_gradients(zip(gradients, variables))
            sent_bytes = dense_bytes = tf.add_n(
                [tf.constant(0, tf.int64)]
                + [gradient_remedies.gradient_bytes(g) for g in gradients]
            )
        return {
            'loss': loss,
            'staleness': staleness,
            'gradient_bytes': sent_bytes,
            'dense_gradient_bytes': dense_bytes,
            **outputs,
        }

    def eval_step(
        self,
        features: dict,
        labels: tf.Tensor,
        keras_model: tf.keras.Model,
        metrics: Mapping[str, tf.keras.metrics.Metric],
    ) -> None:
        self.update_metrics(labels, keras_model(features, training=False), metrics)


def _scale(gradient, scale: tf.Tensor):
    # Embedding gradients are IndexedSlices: scale their values, keep them sparse.
    if isinstance(gradient, tf.IndexedSlices):
        return tf.IndexedSlices(gradient.values * scale, gradient.indices, gradient.dense_shape)
    return gradient * scale
