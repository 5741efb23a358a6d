"""Pre-batched examples: each record holds many examples, column by column.

Transform writes one `tf.Example` per example, so a training step of 256 examples parses 256
protos, and on a small machine parsing is what the accelerator waits for (`asynctrain bench
input`). Here a record is one `tf.Example` whose every feature holds the values of up to
`examples_per_record` examples, in order (a scalar feature: one value per example; a feature of
shape [d]: d values per example, example after example). A step then parses about one record.
The records are still plain GZIP TFRecords of `tf.Example`s that any TFRecord tool can read.

Writing (`write_split`): one split's examples are dealt to shards by a seeded hash of their
bytes, each shard ordered by that hash, parsed (raw examples transformed in the same call by
their tf.Transform graph, so Transform itself need not materialize anything) in large vectorized
batches, and cut into records (`shuffled_shards`: the layout, so that one process and a Beam
pipeline on any runner write the same bytes for the same seed). NumPy lays the records out in
the wire format (`example_wire`).

Reading (`make_batched_dataset`): files interleaved, records shuffled, each record parsed in one
call, then a window of `shuffle_buffer` examples drawn from several records is permuted in one
gather and sliced into batches (`rebatch`), so a batch mixes examples of many records and no
Python or per-example op runs. A `batched_examples.json` beside each split's files says the split
is in this format; `is_batched` reads it.

Framework-free: the ExampleBatcher executor, the Trainer's data module, tests and benchmarks share
it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping

import numpy as np
import tensorflow as tf

from asynctrain.components.shared import shuffled_shards

FORMAT = 'columnar_tf_example'
METADATA_FILE_NAME = 'batched_examples.json'
DEFAULT_EXAMPLES_PER_RECORD = 256
# Files (shards) per split; 0: one per `shuffled_shards.SHARD_SOURCE_BYTES` of source, at least
# `shuffled_shards.MIN_SHARDS`.
DEFAULT_NUM_FILES = 0
# Source records parsed per vectorized call by `column_batches`.
_READ_BATCH = 8192


def split_dir(examples_dir: str, split: str) -> str:
    """Where TFX keeps one split of an Examples artifact."""
    return os.path.join(examples_dir, f'Split-{split}')


def read_metadata(file_pattern: str) -> dict | None:
    """The metadata of the batched split whose files `file_pattern` matches, or None when the
    folder holds one `tf.Example` per record."""
    path = os.path.join(os.path.dirname(file_pattern), METADATA_FILE_NAME)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        metadata = json.load(f)
    if metadata.get('format') != FORMAT:
        raise ValueError(f'{path}: format: expected {FORMAT!r}, got {metadata.get("format")!r}')
    return metadata


def is_batched(file_pattern: str) -> bool:
    return read_metadata(file_pattern) is not None


def _check_feature_spec(feature_spec: Mapping[str, tf.io.FixedLenFeature]) -> None:
    for name, spec in feature_spec.items():
        if not isinstance(spec, tf.io.FixedLenFeature):
            raise ValueError(
                f'feature {name!r}: expected a FixedLenFeature (one value or a fixed shape per '
                f'example), got {spec}'
            )


def column_batches(
    file_pattern: str,
    parse_spec: Mapping[str, tf.io.FixedLenFeature | tf.io.VarLenFeature],
    transform: Callable[[dict], dict] | None = None,
    batch_size: int = _READ_BATCH,
) -> Iterator[dict[str, np.ndarray]]:
    """The examples of GZIP TFRecord files of `tf.Example`s, `batch_size` at a time as one array
    per feature, in file order (files sorted by name). Each batch is parsed with `parse_spec`
    and, given `transform` (a function of the parsed tensors, such as a tf.Transform graph's
    `transform_features_layer()`), transformed in the same vectorized call."""

    # Not converted by AutoGraph: there is no Python control flow to convert, and converting the
    # transform layer's call tree took 8.7 s of a 1,500-row taxi split's 12.9 s.
    @tf.autograph.experimental.do_not_convert
    def parse(serialized: tf.Tensor) -> dict[str, tf.Tensor]:
        parsed = tf.io.parse_example(serialized, dict(parse_spec))
        return transform(parsed) if transform is not None else parsed

    batches = (
        tf.data.TFRecordDataset(shuffled_shards.source_files(file_pattern), compression_type='GZIP')
        .batch(batch_size)
        .map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        .prefetch(2)
    )
    yield from batches.as_numpy_iterator()


def read_columns(
    file_pattern: str, feature_spec: Mapping[str, tf.io.FixedLenFeature]
) -> dict[str, np.ndarray]:
    """Every example of GZIP TFRecord files of `tf.Example`s, as one array per feature, in file
    order (files sorted by name)."""
    _check_feature_spec(feature_spec)
    parts: dict[str, list[np.ndarray]] = {name: [] for name in feature_spec}
    for batch in column_batches(file_pattern, feature_spec):
        for name, values in batch.items():
            parts[name].append(values)
    return {name: np.concatenate(values) for name, values in parts.items()}


def write_split(
    source_pattern: str,
    feature_spec: Mapping[str, tf.io.FixedLenFeature],
    output_dir: str,
    examples_per_record: int = DEFAULT_EXAMPLES_PER_RECORD,
    num_files: int = DEFAULT_NUM_FILES,
    seed: int = 0,
    *,
    transform: Callable[[dict], dict] | None = None,
    parse_spec: Mapping[str, tf.io.FixedLenFeature | tf.io.VarLenFeature] | None = None,
) -> dict:
    """Writes the examples matching `source_pattern`, shuffled, as batched records in
    `output_dir`, in this process; returns the metadata it writes beside them.

    `feature_spec` is what the records hold. The source is parsed with it, or, given `transform`
    (raw examples and their tf.Transform graph's `transform_features_layer()`), parsed with
    `parse_spec` (the raw feature spec) and transformed on the way. The files are those of the
    seeded layout (`shuffled_shards`): `num_files` shards, or with 0 one per
    `shuffled_shards.SHARD_SOURCE_BYTES` of source; memory is bounded by a shard.
    """
    if examples_per_record < 1:
        raise ValueError(f'examples_per_record: expected >= 1, got {examples_per_record}')
    _check_feature_spec(feature_spec)
    files = shuffled_shards.source_files(source_pattern)
    shards = shuffled_shards.num_shards(shuffled_shards.source_bytes(files), num_files)
    decode = shuffled_shards.RowDecoder(feature_spec, transform, parse_spec)
    stats = shuffled_shards.write_split(
        files, decode, output_dir, examples_per_record, shards, seed
    )
    metadata = shuffled_shards.split_metadata(
        stats, feature_dtypes(feature_spec), examples_per_record, shards, seed, FORMAT
    )
    write_metadata(output_dir, metadata)
    return metadata


def feature_dtypes(feature_spec: Mapping[str, tf.io.FixedLenFeature]) -> dict[str, str]:
    """What the metadata records of the features: each one's dtype name."""
    return {name: spec.dtype.name for name, spec in sorted(feature_spec.items())}


def write_metadata(output_dir: str, metadata: Mapping) -> None:
    with tf.io.gfile.GFile(os.path.join(output_dir, METADATA_FILE_NAME), 'w') as f:
        json.dump(metadata, f, indent=2, sort_keys=True)


def record_parser(feature_spec: Mapping[str, tf.io.FixedLenFeature]):
    """A function from one serialized record to {feature: [examples_in_record, *shape]}."""
    _check_feature_spec(feature_spec)
    sequence_spec = {
        name: tf.io.FixedLenSequenceFeature(list(spec.shape), spec.dtype, allow_missing=True)
        for name, spec in feature_spec.items()
    }

    def parse(serialized: tf.Tensor) -> dict[str, tf.Tensor]:
        return tf.io.parse_single_example(serialized, sequence_spec)

    return parse


def _split_label(columns: dict[str, tf.Tensor], label_key: str) -> tuple[dict, tf.Tensor]:
    features = dict(columns)
    label = features.pop(label_key)
    return features, label


def make_batched_dataset(
    file_pattern: str,
    feature_spec: Mapping[str, tf.io.FixedLenFeature],
    label_key: str,
    batch_size: int,
    training: bool,
    interleave_cycle_length: int = 4,
    num_parallel_calls: int = tf.data.AUTOTUNE,
    shuffle_buffer: int = 10000,
    cache: str | None = None,
    prefetch: int = tf.data.AUTOTUNE,
) -> tf.data.Dataset:
    """Batches of (features, label) from the batched split `file_pattern` matches, with the
    batch dimension unknown (None) in the element spec.

    Training: files in a random order, records shuffled (a buffer of `shuffle_buffer` examples'
    worth of records), repeated forever, then windows of about `shuffle_buffer` examples, drawn
    from consecutive shuffled records, permuted in one gather and cut into full batches.
    Evaluation: every example once, files and records in order, the last batch partial. `cache`
    (a file name, or '' for memory) keeps the parsed records of the first pass; None keeps
    nothing.
    """
    metadata = read_metadata(file_pattern)
    if metadata is None:
        raise ValueError(
            f'{file_pattern}: no {METADATA_FILE_NAME} beside the files: not a batched split'
        )
    if label_key not in feature_spec:
        raise ValueError(
            f'label_key: {label_key!r} is not among the features {sorted(feature_spec)}'
        )
    files = tf.data.Dataset.list_files(file_pattern, shuffle=training)
    records = files.interleave(
        lambda path: tf.data.TFRecordDataset(path, compression_type='GZIP'),
        cycle_length=interleave_cycle_length,
        num_parallel_calls=num_parallel_calls,
        deterministic=not training,
    )
    record_buffer = max(1, shuffle_buffer // metadata['examples_per_record'])
    if training and shuffle_buffer:
        records = records.shuffle(record_buffer, reshuffle_each_iteration=True)
    columns = records.map(
        record_parser(feature_spec),
        num_parallel_calls=num_parallel_calls,
        deterministic=not training,
    )
    if cache is not None:
        columns = columns.cache(cache)
        if training and shuffle_buffer:
            columns = columns.shuffle(record_buffer, reshuffle_each_iteration=True)
    if not training:
        batches = columns.rebatch(batch_size, drop_remainder=False).map(
            lambda c: _split_label(c, label_key)
        )
    elif not shuffle_buffer:
        batches = columns.repeat().rebatch(batch_size).map(lambda c: _split_label(c, label_key))
    else:
        # A window of whole batches; the stream is endless, so every window is full. The window
        # keeps an unknown size in its spec (drop_remainder=False), and so do the batches cut
        # from it, as the step's signature expects.
        batches_per_window = max(1, -(-shuffle_buffer // batch_size))

        def permute_and_cut(columns: dict[str, tf.Tensor]) -> tuple[dict, tf.Tensor]:
            permuted = permute_rows(columns)
            cut = {
                name: tf.reshape(values, [batches_per_window, -1] + list(feature_spec[name].shape))
                for name, values in permuted.items()
            }
            return _split_label(cut, label_key)

        batches = (
            columns.repeat()
            .rebatch(batches_per_window * batch_size, drop_remainder=False)
            .map(permute_and_cut, num_parallel_calls=num_parallel_calls, deterministic=False)
            .unbatch()
        )
    options = tf.data.Options()
    options.deterministic = not training
    return batches.prefetch(prefetch).with_options(options)


def permute_rows(columns: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    """The same random permutation of the rows of every column."""
    first = next(iter(columns.values()))
    order = tf.random.shuffle(tf.range(tf.shape(first)[0]))
    return {name: tf.gather(values, order) for name, values in columns.items()}
