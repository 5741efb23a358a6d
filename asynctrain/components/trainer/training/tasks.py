"""The concrete tasks: binary classification, multiclass classification, regression.

Each owns its head size, loss, metrics and serving outputs; `make_task` picks one from
`trainer.task.type`. The transformed label each expects (Transform writes it):
- binary: int64 0/1;
- multiclass: int64 id into Transform's `label_classes` vocabulary (its order is the class
  order), -1 for an eval row whose class the train split never had: such rows are left out of
  the loss and the metrics;
- regression: float32 in the label's own units; the task standardizes it (log(1 + label) with
  the `msle` loss) for training with the train split's mean and standard deviation, and serves
  predictions in the label's units.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import tensorflow as tf

from asynctrain.components.shared.tasks import (  # the contract with Transform
    LABEL_VOCABULARY,
    TASK_TYPES,
)
from asynctrain.components.trainer import config as config_lib
from asynctrain.components.trainer.training import data, export
from asynctrain.components.trainer.training.task import Task, TransformedSchema


class BinaryClassificationTask(Task):
    """A 0/1 label: one logit, sigmoid cross-entropy; serves `probabilities` [batch, 1]."""

    task_type = 'binary'

    @property
    def num_outputs(self) -> int:
        return 1

    def describe(self) -> str:
        return 'the binary task'

    def _losses(self, labels: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
        labels = tf.reshape(tf.cast(labels, tf.float32), [-1, 1])
        return tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)

    def loss(self, labels: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
        return tf.reduce_mean(self._losses(labels, logits))

    def build_metrics(self) -> dict[str, tf.keras.metrics.Metric]:
        return {
            'loss': tf.keras.metrics.Mean(name='loss'),
            'auc': tf.keras.metrics.AUC(name='auc', num_thresholds=1000),
            'accuracy': tf.keras.metrics.BinaryAccuracy(name='accuracy'),
            'label_mean': tf.keras.metrics.Mean(name='label_mean'),
        }

    def update_metrics(
        self, labels: tf.Tensor, logits: tf.Tensor, metrics: Mapping[str, tf.keras.metrics.Metric]
    ) -> None:
        probabilities = tf.sigmoid(logits)
        metrics['loss'].update_state(self._losses(labels, logits))
        labels = tf.reshape(tf.cast(labels, tf.float32), [-1, 1])
        metrics['auc'].update_state(labels, probabilities)
        metrics['accuracy'].update_state(labels, probabilities)
        metrics['label_mean'].update_state(labels)

    def serving_outputs(self, logits: tf.Tensor) -> dict[str, tf.Tensor]:
        return {export.PROBABILITIES: tf.sigmoid(logits)}


class MulticlassClassificationTask(Task):
    """A class id: one logit per class, softmax cross-entropy; serves `probabilities`
    [batch, num_classes], `classes` (the names, [batch, num_classes]) and `predicted_class`."""

    task_type = 'multiclass'

    def __init__(
        self,
        schema: TransformedSchema,
        trainer_config: config_lib.TrainerConfig,
        class_names: Sequence[str],
    ):
        label = schema.feature_spec[schema.label_key]
        if label.dtype != tf.int64:
            raise ValueError(
                f'label {schema.label_key!r}: the multiclass task needs an int64 class id '
                f'(from the {LABEL_VOCABULARY!r} vocabulary), got {label.dtype.name}'
            )
        if len(class_names) < 2:
            raise ValueError(
                f'label {schema.label_key!r}: the multiclass task needs at least 2 classes in '
                f'the {LABEL_VOCABULARY!r} vocabulary, got {list(class_names)}'
            )
        self.class_names = tuple(class_names)
        super().__init__(schema, trainer_config)

    @property
    def num_outputs(self) -> int:
        return len(self.class_names)

    def describe(self) -> str:
        return f'the multiclass task with {self.num_outputs} classes'

    def _known(self, labels: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """(ids, weights): ids clipped into range, weight 0 for unseen classes (id -1)."""
        labels = tf.reshape(labels, [-1])
        weights = tf.cast(labels >= 0, tf.float32)
        return tf.maximum(labels, 0), weights

    def _losses(self, labels: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
        return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)

    def loss(self, labels: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
        ids, weights = self._known(labels)
        losses = self._losses(ids, logits) * weights
        return tf.reduce_sum(losses) / tf.maximum(tf.reduce_sum(weights), 1.0)

    def build_metrics(self) -> dict[str, tf.keras.metrics.Metric]:
        return {
            'loss': tf.keras.metrics.Mean(name='loss'),
            'accuracy': tf.keras.metrics.SparseCategoricalAccuracy(name='accuracy'),
            'unseen_class_examples': tf.keras.metrics.Sum(name='unseen_class_examples'),
        }

    def update_metrics(
        self, labels: tf.Tensor, logits: tf.Tensor, metrics: Mapping[str, tf.keras.metrics.Metric]
    ) -> None:
        ids, weights = self._known(labels)
        metrics['loss'].update_state(self._losses(ids, logits), sample_weight=weights)
        metrics['accuracy'].update_state(ids, logits, sample_weight=weights)
        metrics['unseen_class_examples'].update_state(1.0 - weights)

    def serving_outputs(self, logits: tf.Tensor) -> dict[str, tf.Tensor]:
        names = tf.constant(self.class_names, tf.string)
        batch = tf.shape(logits)[0]
        return {
            export.PROBABILITIES: tf.nn.softmax(logits),
            export.CLASSES: tf.tile(names[tf.newaxis, :], [batch, 1]),
            export.PREDICTED_CLASS: tf.gather(names, tf.argmax(logits, axis=-1)),
        }


class RegressionTask(Task):
    """A float label: one output, trained on the standardized label with MSE or Huber, or on the
    standardized log(1 + label) with MSE (`msle`); metrics and the served `predictions`
    [batch, 1] are in the label's own units."""

    task_type = 'regression'

    def __init__(self, schema: TransformedSchema, trainer_config: config_lib.TrainerConfig):
        label = schema.feature_spec[schema.label_key]
        if label.dtype not in (tf.float32, tf.int64):
            raise ValueError(
                f'label {schema.label_key!r}: the regression task needs a float32 (or int64) '
                f'label, got {label.dtype.name}'
            )
        super().__init__(schema, trainer_config)
        self.label_mean: float | None = None
        self.label_std: float | None = None

    @property
    def num_outputs(self) -> int:
        return 1

    def describe(self) -> str:
        return 'the regression task'

    def prepare(self, examples_dir: str) -> None:
        if self.label_mean is not None:
            return
        pattern = data.split_file_pattern(examples_dir, data.TRAIN_SPLIT)
        label_key = self.schema.label_key
        count, mean, std = data.label_moments(
            pattern, label_key, self.schema.feature_spec[label_key], log1p=self._log1p
        )
        if not count:
            raise ValueError(f'{pattern}: no training examples to standardize {label_key!r} with')
        if not math.isfinite(mean):
            raise ValueError(
                f'{pattern}: loss msle needs a label above -1 (a non-negative one), but '
                f'{label_key!r} has values at or below -1; use loss mse or huber'
            )
        # A constant label: any scale works; 1 keeps the loss finite.
        self.set_label_statistics(mean, std or 1.0)

    def set_label_statistics(self, mean: float, std: float) -> None:
        if not std > 0:
            raise ValueError(f'label standard deviation: expected > 0, got {std}')
        self.label_mean, self.label_std = float(mean), float(std)

    def _statistics(self) -> tuple[float, float]:
        if self.label_mean is None or self.label_std is None:
            raise RuntimeError('RegressionTask: call prepare(examples_dir) before using the task')
        return self.label_mean, self.label_std

    @property
    def _log1p(self) -> bool:
        return self.config.task.loss == 'msle'

    def _standardized(self, labels: tf.Tensor) -> tf.Tensor:
        mean, std = self._statistics()
        labels = tf.reshape(tf.cast(labels, tf.float32), [-1, 1])
        if self._log1p:
            labels = tf.math.log1p(labels)
        return (labels - mean) / std

    def _losses(self, labels: tf.Tensor, outputs: tf.Tensor) -> tf.Tensor:
        error = outputs - self._standardized(labels)
        if self.config.task.loss == 'huber':
            delta = self.config.task.huber_delta
            absolute = tf.abs(error)
            quadratic = tf.minimum(absolute, delta)
            return 0.5 * tf.square(quadratic) + delta * (absolute - quadratic)
        return tf.square(error)

    def loss(self, labels: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
        return tf.reduce_mean(self._losses(labels, logits))

    def predictions(self, outputs: tf.Tensor) -> tf.Tensor:
        """The model's standardized outputs in the label's units."""
        mean, std = self._statistics()
        if self._log1p:
            return tf.math.expm1(outputs * std + mean)
        return outputs * std + mean

    def build_metrics(self) -> dict[str, tf.keras.metrics.Metric]:
        return {
            'loss': tf.keras.metrics.Mean(name='loss'),
            'rmse': tf.keras.metrics.RootMeanSquaredError(name='rmse'),
            'mse': tf.keras.metrics.MeanSquaredError(name='mse'),
            'mae': tf.keras.metrics.MeanAbsoluteError(name='mae'),
            'label_mean': tf.keras.metrics.Mean(name='label_mean'),
        }

    def update_metrics(
        self, labels: tf.Tensor, logits: tf.Tensor, metrics: Mapping[str, tf.keras.metrics.Metric]
    ) -> None:
        metrics['loss'].update_state(self._losses(labels, logits))
        labels = tf.reshape(tf.cast(labels, tf.float32), [-1, 1])
        predictions = self.predictions(logits)
        for name in ('rmse', 'mse', 'mae'):
            metrics[name].update_state(labels, predictions)
        metrics['label_mean'].update_state(labels)

    def serving_outputs(self, logits: tf.Tensor) -> dict[str, tf.Tensor]:
        return {export.PREDICTIONS: self.predictions(logits)}


def read_class_names(transform_graph_dir: str) -> tuple[str, ...]:
    """The multiclass label's class names, in class-id order (the vocabulary file's order)."""
    import tensorflow_transform as tft

    tft_output = tft.TFTransformOutput(transform_graph_dir)
    try:
        vocabulary = tft_output.vocabulary_by_name(LABEL_VOCABULARY)
    except (ValueError, tf.errors.NotFoundError) as e:
        raise ValueError(
            f'{transform_graph_dir}: the multiclass task needs the label vocabulary '
            f'{LABEL_VOCABULARY!r} (tft.compute_and_apply_vocabulary(..., '
            f"vocab_filename='{LABEL_VOCABULARY}')): {e}"
        ) from e
    return tuple(v.decode('utf-8') if isinstance(v, bytes) else str(v) for v in vocabulary)


def make_task(
    schema: TransformedSchema, trainer_config: config_lib.TrainerConfig, transform_graph_dir: str
) -> Task:
    """The task `trainer_config.task.type` names, over Transform's output."""
    task_type = trainer_config.task.type
    if task_type == 'binary':
        return BinaryClassificationTask(schema, trainer_config)
    if task_type == 'multiclass':
        return MulticlassClassificationTask(
            schema, trainer_config, read_class_names(transform_graph_dir)
        )
    if task_type == 'regression':
        return RegressionTask(schema, trainer_config)
    raise ValueError(f'trainer.task.type: got {task_type!r}; allowed: {TASK_TYPES}')
