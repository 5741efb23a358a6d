"""Hand-made serving models and raw examples for the Evaluator's tests.

A `ScoreModel` has the export's two signatures, `serving_default` (the task's outputs, several of
them for multiclass) and `transform_features` (the transformed label), so a test evaluates what
the Trainer's export looks like to an evaluator, with predictions known from one feature `x`.
"""

from __future__ import annotations

import json
import os

import numpy as np
import tensorflow as tf

from asynctrain.components.trainer.training import export
from asynctrain.components.transform import feature_config as fc

LABEL = 'Species (label)'
CLASSES = ['Adelie', 'Gentoo', 'Chinstrap']
RAW_SPEC = {'x': tf.io.FixedLenFeature([], tf.float32), LABEL: tf.io.VarLenFeature(tf.string)}


class ScoreModel(tf.Module):
    """serving_default and transform_features, as the export writes them, for one task.

    `slope` changes the predictions (two models that disagree make a candidate and a baseline).
    With `payment_vocabulary`, `transform_features` also outputs `payment_type` under its raw
    name, as the taxi transform does: the id of the raw value in that vocabulary, every other
    value the one out-of-vocabulary id after it.
    """

    def __init__(self, task: str, slope: float = 4.0, payment_vocabulary: tuple[str, ...] = ()):
        super().__init__()
        self._task = task
        self._slope = slope
        self._classes = tf.constant(CLASSES)
        self._payment_vocabulary = list(payment_vocabulary)

    def _payment_ids(self, examples):
        raw = tf.io.parse_example(examples, {'payment_type': tf.io.VarLenFeature(tf.string)})
        text = tf.reshape(tf.sparse.to_dense(raw['payment_type'], default_value=''), [-1])
        matches = tf.equal(text[:, None], tf.constant(self._payment_vocabulary)[None, :])
        known = tf.reduce_any(matches, axis=1)
        oov = tf.cast(len(self._payment_vocabulary), tf.int64)
        return tf.where(known, tf.argmax(tf.cast(matches, tf.int64), axis=1), oov)

    def _transform(self, examples):
        raw = tf.io.parse_example(examples, RAW_SPEC)
        text = tf.reshape(tf.sparse.to_dense(raw[LABEL], default_value=''), [-1])
        if self._task == fc.REGRESSION:
            label = tf.strings.to_number(text)
        else:
            ids = tf.argmax(tf.cast(tf.equal(text[:, None], self._classes[None, :]), tf.int64), 1)
            label = ids if self._task == fc.MULTICLASS else tf.cast(tf.equal(ids, 0), tf.int64)
        return {LABEL: label}, raw['x']

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name='examples')])
    def transform_features(self, examples):
        features = self._transform(examples)[0]
        if self._payment_vocabulary:
            features['payment_type'] = self._payment_ids(examples)
        return features

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name='examples')])
    def serve(self, examples):
        x = self._transform(examples)[1]
        if self._task == fc.REGRESSION:
            return {export.PREDICTIONS: (x * self._slope / 4.0)[:, None]}
        if self._task == fc.BINARY:  # P(Adelie): high for small x.
            return {export.PROBABILITIES: tf.sigmoid(2.0 - self._slope * x)[:, None]}
        ids = tf.clip_by_value(tf.cast(x * self._slope / 4.0, tf.int32), 0, len(CLASSES) - 1)
        probabilities = tf.one_hot(ids, len(CLASSES)) * 0.8 + 0.2 / 3
        batch = tf.shape(x)[0]
        return {
            export.PROBABILITIES: probabilities,
            export.CLASSES: tf.tile(self._classes[None, :], [batch, 1]),
            export.PREDICTED_CLASS: tf.gather(self._classes, tf.argmax(probabilities, 1)),
        }


def save_model(
    task: str, model_dir: str, slope: float = 4.0, payment_vocabulary: tuple[str, ...] = ()
) -> str:
    model = ScoreModel(task, slope, payment_vocabulary)
    tf.saved_model.save(
        model,
        model_dir,
        signatures={
            export.SERVING_SIGNATURE: model.serve,
            export.TRANSFORM_SIGNATURE: model.transform_features,
        },
    )
    return model_dir


def random_rows(task: str, n: int, seed: int = 0) -> list[tuple[object, float]]:
    """(raw label, x) rows whose label depends on x with noise, so metrics are neither 0 nor 1."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, 3.0, n)
    if task == fc.REGRESSION:
        return [(round(float(v * 10 + rng.normal(0, 3)), 3), float(v)) for v in x]
    noisy = np.clip(np.floor(x + rng.normal(0, 0.6, n)), 0, 2).astype(int)
    return [(CLASSES[i], float(v)) for i, v in zip(noisy, x)]


# Raw features the models never read, to slice on: a payment type (absent from some examples;
# on 'Mobile' examples `x` is noise, so that slice scores badly), an hour (int64) and one or two
# companies per example (a multi-valued feature); and a weight per example (`WEIGHT`).
WEIGHT = 'trip_miles'
PAYMENT_TYPES = ['Cash', 'Credit Card', 'Mobile']
COMPANIES = ['Flash Cab', 'Sun Taxi', 'Blue Ribbon']


def serialize(rows, slice_features: bool = False, seed: int = 1, payment_types=None) -> list[bytes]:
    """Serialized examples of `rows`; with `slice_features`, random slice features (as above);
    with `payment_types`, that payment type for each row. The bytes are the same in every
    process (map entries sorted, as our ExampleGen writes them): the Evaluator's bootstrap draws
    are keyed by them."""
    rng = np.random.default_rng(seed)
    out = []
    for index, (label, x) in enumerate(rows):
        example = tf.train.Example()
        feature = example.features.feature
        if payment_types:
            feature['payment_type'].bytes_list.value.append(payment_types[index].encode())
        if slice_features:
            payment = PAYMENT_TYPES[rng.choice(3, p=[0.5, 0.4, 0.1])]
            if payment == 'Mobile':
                x = float(rng.uniform(0.0, 3.0))
            if rng.random() > 0.05:
                feature['payment_type'].bytes_list.value.append(payment.encode())
            feature['trip_start_hour'].int64_list.value.append(int(rng.integers(0, 4)))
            companies = rng.choice(COMPANIES, size=int(rng.integers(1, 3)), replace=False)
            feature['company'].bytes_list.value.extend(c.encode() for c in companies)
            feature[WEIGHT].float_list.value.append(float(rng.uniform(0.5, 3.0)))
        feature['x'].float_list.value.append(x)
        feature[LABEL].bytes_list.value.append(str(label).encode())
        out.append(example.SerializeToString(deterministic=True))
    return out


def write_gzip_tfrecords(path: str, records: list[bytes], num_files: int = 1) -> list[str]:
    """`records` dealt over `num_files` GZIP TFRecord files `<path>-0000K.gz`, as ExampleGen
    writes a split."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    files = []
    for k in range(num_files):
        name = f'{path}-{k:05d}.gz'
        with tf.io.TFRecordWriter(name, options='GZIP') as writer:
            for record in records[k::num_files]:
                writer.write(record)
        files.append(name)
    return files


def artifact(cls, uri, artifact_id=None, split_names=None):
    """A TFX artifact of `cls` at `uri`, with an ML Metadata id and split names where given."""
    made = cls()
    made.uri = str(uri)
    if artifact_id is not None:
        made.id = artifact_id
    if split_names:
        made.split_names = json.dumps(split_names)
    return made
