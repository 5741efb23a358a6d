"""One worker's input pipeline over transformed examples (GZIP TFRecords of tf.Examples), or
over the ExampleBatcher's pre-batched records of them.

Files are interleaved in parallel, records shuffled, batched, then parsed in one vectorized
`parse_example` call per batch, and prefetched: no Python runs per example, and reading overlaps
the train step. The pipeline is built once per worker, by the coordinator's
`create_per_worker_dataset`.

With `input.cache`, the parsed batches of the first epoch are kept (in memory or in a file) and
later epochs replay them in a fresh order each epoch. Parsing is what limits the input rate on a
small machine (`asynctrain bench input`: about 90k examples/s parsed on two cores, several times
that replayed from the cache), so the cache goes after it, not before. The price: after the first
epoch a batch always holds the same examples (only the order of batches is reshuffled), and the
last, partial batch of each epoch stays partial.

A split that the ExampleBatcher wrote (a `batched_examples.json` beside its files) is read with
`columnar_records.make_batched_dataset` instead: each record holds a few hundred examples column
by column, so a step parses about one record rather than 256 protos, and batches are drawn across
records by a vectorized permutation (see that module). In `asynctrain bench input` it fed the
default model at 0.94 of the in-memory upper bound with no cache, from the first epoch (2 cores,
2026-12-01; docs/bench_input.json).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import tensorflow as tf

from asynctrain.components.shared import columnar_records
from asynctrain.components.trainer import config as config_lib

TRAIN_SPLIT = 'train'
EVAL_SPLIT = 'eval'


def split_file_pattern(examples_dir: str, split: str) -> str:
    """Where TFX writes one split of an Examples artifact."""
    return os.path.join(examples_dir, f'Split-{split}', '*.gz')


def element_spec(
    feature_spec: Mapping[str, tf.io.FixedLenFeature], label_key: str
) -> tuple[dict, tf.TensorSpec]:
    """(features, label) specs of one batch, with the batch dimension unknown so that a partial
    last batch matches the same `tf.function` signature."""
    features = {
        name: tf.TensorSpec([None] + list(spec.shape), spec.dtype)
        for name, spec in sorted(feature_spec.items())
        if name != label_key
    }
    label = feature_spec[label_key]
    return features, tf.TensorSpec([None] + list(label.shape), label.dtype)


def make_dataset(
    file_pattern: str,
    feature_spec: Mapping[str, tf.io.FixedLenFeature],
    label_key: str,
    batch_size: int,
    input_config: config_lib.InputConfig,
    training: bool = True,
    cache_path: str | None = None,
) -> tf.data.Dataset:
    """Batches of (features, label) from the files matching `file_pattern`.

    Training datasets shuffle and repeat forever (the loop schedules a fixed number of steps, as
    the coordinator expects); evaluation reads each example once, in order, and keeps the partial
    last batch.
    """
    if columnar_records.is_batched(file_pattern):
        return _make_batched_dataset(
            file_pattern, feature_spec, label_key, batch_size, input_config, training, cache_path
        )
    files = tf.data.Dataset.list_files(file_pattern, shuffle=training)
    records = files.interleave(
        lambda path: tf.data.TFRecordDataset(path, compression_type='GZIP'),
        cycle_length=input_config.interleave_cycle_length,
        num_parallel_calls=input_config.num_parallel_calls,
        deterministic=not training,
    )
    if training and input_config.shuffle_buffer:
        records = records.shuffle(input_config.shuffle_buffer, reshuffle_each_iteration=True)
    cached = input_config.cache != 'none'
    if training and not cached:
        # Repeat before batch so that every training batch is full; the eval split's last batch
        # may be partial, which the None batch dimension of the step's signature allows.
        records = records.repeat()
    batches = records.batch(batch_size, drop_remainder=False)
    parse_spec = dict(feature_spec)

    def parse(serialized: tf.Tensor):
        parsed = tf.io.parse_example(serialized, parse_spec)
        label = parsed.pop(label_key)
        return parsed, label

    batches = batches.map(
        parse, num_parallel_calls=input_config.num_parallel_calls, deterministic=not training
    )
    if cached:
        # An empty file name is tf.data's in-memory cache.
        batches = batches.cache(_cache_file_name(input_config, cache_path))
        if training:
            if input_config.shuffle_buffer:
                batches = batches.shuffle(
                    max(1, input_config.shuffle_buffer // batch_size), reshuffle_each_iteration=True
                )
            batches = batches.repeat()
    options = tf.data.Options()
    options.deterministic = not training
    return batches.prefetch(input_config.prefetch).with_options(options)


def _cache_file_name(input_config: config_lib.InputConfig, cache_path: str | None) -> str:
    """`tf.data.Dataset.cache`'s file name for `input.cache`: the file for `file`, and for
    `memory` the empty name, which is tf.data's in-memory cache."""
    return (cache_path or '') if input_config.cache == 'file' else ''


def _make_batched_dataset(
    file_pattern: str,
    feature_spec: Mapping[str, tf.io.FixedLenFeature],
    label_key: str,
    batch_size: int,
    input_config: config_lib.InputConfig,
    training: bool,
    cache_path: str | None,
) -> tf.data.Dataset:
    cache = _cache_file_name(input_config, cache_path) if input_config.cache != 'none' else None
    return columnar_records.make_batched_dataset(
        file_pattern,
        feature_spec,
        label_key,
        batch_size,
        training,
        interleave_cycle_length=input_config.interleave_cycle_length,
        num_parallel_calls=input_config.num_parallel_calls,
        shuffle_buffer=input_config.shuffle_buffer,
        cache=cache,
        prefetch=input_config.prefetch,
    )


def label_moments(
    file_pattern: str,
    label_key: str,
    label_spec: tf.io.FixedLenFeature,
    batch_size: int = 4096,
    log1p: bool = False,
) -> tuple[int, float, float]:
    """(count, mean, standard deviation) of the label (of log(1 + label) with `log1p`) over the
    files matching `file_pattern`.

    One pass that parses only the label, reading the files in a fixed order and summing in
    float64, so that every call (every recovery attempt) gets the same values.
    """
    files = tf.data.Dataset.list_files(file_pattern, shuffle=False)
    records = files.flat_map(lambda path: tf.data.TFRecordDataset(path, compression_type='GZIP'))
    if columnar_records.is_batched(file_pattern):
        parse_record = columnar_records.record_parser({label_key: label_spec})
        # Already a few hundred labels per record.
        batches = records.map(lambda serialized: parse_record(serialized)[label_key])
    else:
        batches = records.batch(batch_size).map(
            lambda serialized: tf.io.parse_example(serialized, {label_key: label_spec})[label_key]
        )
    labels = batches.map(lambda label: tf.reshape(tf.cast(label, tf.float64), [-1]))
    if log1p:
        labels = labels.map(tf.math.log1p)

    @tf.function(autograph=False)
    def moments():
        zero = tf.constant(0.0, tf.float64)
        return labels.reduce(
            (zero, zero, zero),
            lambda acc, x: (
                acc[0] + tf.cast(tf.size(x), tf.float64),
                acc[1] + tf.reduce_sum(x),
                acc[2] + tf.reduce_sum(tf.square(x)),
            ),
        )

    count, total, total_squares = (float(v) for v in moments())
    if not count:
        return 0, 0.0, 0.0
    mean = total / count
    return int(count), mean, max(total_squares / count - mean * mean, 0.0) ** 0.5
