"""The reference Trainer: what TFX's own examples do (stock Trainer, `run_fn`, `model.fit`).

`data_accessor.tf_dataset_factory` feeds `model.fit` under the default strategy. It is the
baseline that `asynctrain bench` compares our Trainer against, and it exports the same serving
contract (`serving_default` on raw serialized tf.Examples, `transform_features`).
"""

from __future__ import annotations

import tensorflow as tf
import tensorflow_transform as tft
from tfx import v1 as tfx
from tfx_bsl.public import tfxio

# Keys of the stock Trainer's custom_config that this run_fn reads.
LABEL_KEY = 'label_key'
BATCH_SIZE = 'batch_size'
HIDDEN_UNITS = 'hidden_units'
LEARNING_RATE = 'learning_rate'


def build_keras_model(
    tft_output: tft.TFTransformOutput,
    label_key: str,
    hidden_units: tuple[int, ...],
    learning_rate: float,
) -> tf.keras.Model:
    """A wide-and-deep-style binary classifier over the transformed features."""
    schema = tft_output.transformed_metadata.schema
    inputs, encoded = {}, []
    for feature in schema.feature:
        if feature.name == label_key:
            continue
        if feature.type == 2 and feature.HasField('int_domain'):  # INT with an id range
            inputs[feature.name] = tf.keras.Input(shape=(), name=feature.name, dtype=tf.int64)
            size = int(feature.int_domain.max) + 1
            embedded = tf.keras.layers.Embedding(size, min(8, size))(inputs[feature.name])
            encoded.append(embedded)
        else:
            inputs[feature.name] = tf.keras.Input(shape=(), name=feature.name, dtype=tf.float32)
            encoded.append(tf.keras.layers.Reshape((1,))(inputs[feature.name]))
    x = tf.keras.layers.Concatenate()(encoded)
    for units in hidden_units:
        x = tf.keras.layers.Dense(units, activation='relu')(x)
    output = tf.keras.layers.Dense(1, activation='sigmoid', name='probabilities')(x)
    model = tf.keras.Model(inputs=inputs, outputs=output)
    model.compile(
        optimizer=tf.keras.optimizers.Adam(learning_rate),
        loss='binary_crossentropy',
        metrics=[tf.keras.metrics.AUC(name='auc')],
    )
    return model


def export_serving_model(
    model: tf.keras.Model, tft_output: tft.TFTransformOutput, label_key: str, export_dir: str
) -> None:
    """SavedModel with `serving_default` (raw tf.Example in) and `transform_features`."""
    model.tft_layer = tft_output.transform_features_layer()
    raw_spec = tft_output.raw_feature_spec()

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name='examples')])
    def serve(examples):
        transformed = model.tft_layer(tf.io.parse_example(examples, raw_spec))
        transformed.pop(label_key, None)
        return {'probabilities': model(transformed)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name='examples')])
    def transform_features(examples):
        return model.tft_layer(tf.io.parse_example(examples, raw_spec))

    model.save(
        export_dir,
        save_format='tf',
        signatures={'serving_default': serve, 'transform_features': transform_features},
    )


def run_fn(fn_args: tfx.components.FnArgs) -> None:
    """Stock Trainer entry point: tf_dataset_factory -> model.fit -> export."""
    config = fn_args.custom_config or {}
    label_key = config[LABEL_KEY]
    batch_size = int(config.get(BATCH_SIZE, 256))
    tft_output = tft.TFTransformOutput(fn_args.transform_output)
    schema = tft_output.transformed_metadata.schema

    def dataset(files):
        return fn_args.data_accessor.tf_dataset_factory(
            files,
            tfxio.TensorFlowDatasetOptions(batch_size=batch_size, label_key=label_key),
            schema,
        ).repeat()

    model = build_keras_model(
        tft_output,
        label_key,
        tuple(config.get(HIDDEN_UNITS, (64, 32))),
        float(config.get(LEARNING_RATE, 0.001)),
    )
    model.fit(
        dataset(fn_args.train_files),
        steps_per_epoch=fn_args.train_steps,
        validation_data=dataset(fn_args.eval_files),
        validation_steps=fn_args.eval_steps,
        verbose=2,
    )
    export_serving_model(model, tft_output, label_key, fn_args.serving_model_dir)
