"""The serving export: one SavedModel that stands alone.

Signatures (what stock Evaluator and Pusher consume):
- `serving_default`: `examples` (serialized raw tf.Example, [None]) -> parse with the raw
  feature spec -> the transform graph -> the model -> the task's outputs:
  - binary: `probabilities` (float32, [None, 1]);
  - multiclass: `probabilities` (float32, [None, num_classes]), `classes` (string,
    [None, num_classes], the class names in class-id order, the same in every row) and
    `predicted_class` (string, [None], the most likely class);
  - regression: `predictions` (float32, [None, 1]) in the label's own units;
- `transform_features`: the same input -> every transformed feature, label included (TFMA calls
  it through `preprocessing_function_names=['transform_features']`).

The transform graph and its assets (vocabularies) are copied into the SavedModel, so it loads and
serves with no cluster and with Transform's output gone.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import tensorflow as tf

from asynctrain.components.shared import tf_environment

SERVING_SIGNATURE = 'serving_default'
TRANSFORM_SIGNATURE = 'transform_features'
EXAMPLES_INPUT = 'examples'
PROBABILITIES = 'probabilities'
CLASSES = 'classes'
PREDICTED_CLASS = 'predicted_class'
PREDICTIONS = 'predictions'


def export_serving_model(
    keras_model: tf.keras.Model,
    transform_graph_dir: str,
    export_dir: str,
    serving_outputs: Callable[[tf.Tensor], dict[str, tf.Tensor]],
    model_inputs: Sequence[str],
) -> str:
    """Writes the serving SavedModel of `keras_model` (unsharded) to `export_dir`.

    Args:
      keras_model: The trained model: transformed features -> logits.
      transform_graph_dir: Transform's output, embedded into the SavedModel.
      export_dir: Where the SavedModel goes.
      serving_outputs: The task's outputs for a batch of logits (`Task.serving_outputs`).
      model_inputs: The transformed features the model is called with (what it trained on).
    """
    import tensorflow_transform as tft

    tf_environment.configure_autograph()
    tft_output = tft.TFTransformOutput(transform_graph_dir)
    raw_feature_spec = tft_output.raw_feature_spec()
    # Attached to the model so that the SavedModel tracks the transform graph and its assets.
    keras_model.tft_layer = tft_output.transform_features_layer()
    model_inputs = sorted(model_inputs)
    examples_spec = tf.TensorSpec([None], tf.string, name=EXAMPLES_INPUT)

    @tf.function(input_signature=[examples_spec])
    def transform_features(examples):
        raw = tf.io.parse_example(examples, raw_feature_spec)
        return keras_model.tft_layer(raw)

    @tf.function(input_signature=[examples_spec])
    def serve(examples):
        transformed = transform_features(examples)
        logits = keras_model({name: transformed[name] for name in model_inputs}, training=False)
        return serving_outputs(logits)

    tf.io.gfile.makedirs(os.path.dirname(export_dir.rstrip('/')) or '.')
    # `save_traces=False`: Keras would otherwise trace every layer's `call` into the SavedModel
    # for `tf.keras.models.load_model` to revive custom layers without their code; what serves
    # (the signatures above) does not use them, and they were the largest part of the export's
    # time (datasets/penguins' whole run: 34.0 s of user CPU with them, 30.2 s without). Keras
    # still loads the export from its config where every layer is a built-in one, as
    # `build_model`'s are; a user model with custom layers serves but needs its code to load.
    keras_model.save(
        export_dir,
        save_format='tf',
        include_optimizer=False,
        save_traces=False,
        signatures={
            SERVING_SIGNATURE: serve.get_concrete_function(),
            TRANSFORM_SIGNATURE: transform_features.get_concrete_function(),
        },
    )
    return export_dir


def load_weights_by_name(keras_model: tf.keras.Model, saved_model_dir: str) -> int:
    """Warm start: copies into `keras_model` every weight of a previous export with the same
    name and shape (the model names its layers, so names are stable across builds). Returns the
    number of weights copied."""
    values = {v.name: v for v in exported_variables(tf.saved_model.load(saved_model_dir))}
    copied = 0
    for weight in keras_model.weights:
        source = values.get(weight.name)
        if source is not None and source.shape == weight.shape:
            weight.assign(source)
            copied += 1
    return copied


def exported_variables(loaded: object) -> list[tf.Variable]:
    """Every variable a loaded export holds, found through its object graph: an export written
    without layer traces restores no Keras `variables` list."""
    return [v for v in tf.train.TrackableView(loaded).descendants() if isinstance(v, tf.Variable)]
