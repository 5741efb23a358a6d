"""Pre-batched examples: each record holds many examples, column by column.

Transform writes one `tf.Example` per example, so a training step of 256 examples parses 256
protos, and on a small machine parsing is what the accelerator waits for (`asynctrain bench
input`). Here a record is one `tf.Example` whose every feature holds the values of up to
`examples_per_record` examples, in order (a scalar feature: one value per example; a feature of
shape [d]: d values per example, example after example). A step then parses about one record.
The records are still plain GZIP TFRecords of `tf.Example`s that any TFRecord tool can read.

Writing: one split's examples are parsed in large vectorized batches, permuted once (a global
shuffle, from a seed, so a rerun writes the same bytes), cut into records and dealt round-robin
over `num_files` files. The split's transformed columns are held in memory while it is written
(about 60 bytes per taxi example: 60 MB for a million); plain tf.data and NumPy, no Beam, since at
these sizes one process writes faster than Beam would start.

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
from collections.abc import Mapping

import numpy as np
import tensorflow as tf

FORMAT = 'columnar_tf_example'
METADATA_FILE_NAME = 'batched_examples.json'
RECORDS_FILE_PREFIX = 'batches'
DEFAULT_EXAMPLES_PER_RECORD = 256
DEFAULT_NUM_FILES = 8
# Source records parsed per vectorized call while reading a split to write it.
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


def read_columns(
    file_pattern: str, feature_spec: Mapping[str, tf.io.FixedLenFeature]
) -> dict[str, np.ndarray]:
    """Every example of GZIP TFRecord files of `tf.Example`s, as one array per feature, in file
    order (files sorted by name)."""
    _check_feature_spec(feature_spec)
    files = sorted(tf.io.gfile.glob(file_pattern))
    if not files:
        raise FileNotFoundError(f'{file_pattern}: no files to read')
    spec = dict(feature_spec)
    batches = (
        tf.data.TFRecordDataset(files, compression_type='GZIP')
        .batch(_READ_BATCH)
        .map(lambda serialized: tf.io.parse_example(serialized, spec))
        .prefetch(2)
    )
    parts: dict[str, list[np.ndarray]] = {name: [] for name in spec}
    for batch in batches.as_numpy_iterator():
        for name, values in batch.items():
            parts[name].append(values)
    return {name: np.concatenate(values) for name, values in parts.items()}


def _feature(values: np.ndarray) -> tf.train.Feature:
    flat = values.reshape(-1)
    if flat.dtype == np.float32:
        return tf.train.Feature(float_list=tf.train.FloatList(value=flat))
    if flat.dtype == np.int64:
        return tf.train.Feature(int64_list=tf.train.Int64List(value=flat))
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=list(flat)))


def encode_record(columns: Mapping[str, np.ndarray], start: int, stop: int) -> bytes:
    """Examples `start:stop` of `columns` as one serialized, column-wise `tf.Example`."""
    features = {name: _feature(values[start:stop]) for name, values in columns.items()}
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString(
        deterministic=True
    )


def write_split(
    source_pattern: str,
    feature_spec: Mapping[str, tf.io.FixedLenFeature],
    output_dir: str,
    examples_per_record: int = DEFAULT_EXAMPLES_PER_RECORD,
    num_files: int = DEFAULT_NUM_FILES,
    seed: int = 0,
) -> dict:
    """Writes the examples matching `source_pattern`, shuffled, as batched records in
    `output_dir`; returns the metadata it writes beside them."""
    if examples_per_record < 1:
        raise ValueError(f'examples_per_record: expected >= 1, got {examples_per_record}')
    if num_files < 1:
        raise ValueError(f'num_files: expected >= 1, got {num_files}')
    columns = read_columns(source_pattern, feature_spec)
    count = len(next(iter(columns.values()))) if columns else 0
    order = np.random.default_rng(seed).permutation(count)
    columns = {name: values[order] for name, values in columns.items()}
    num_records = -(-count // examples_per_record)
    num_files = max(1, min(num_files, num_records))
    tf.io.gfile.makedirs(output_dir)
    options = tf.io.TFRecordOptions(compression_type='GZIP')
    paths = [
        os.path.join(output_dir, f'{RECORDS_FILE_PREFIX}-{i:05d}-of-{num_files:05d}.gz')
        for i in range(num_files)
    ]
    writers = [tf.io.TFRecordWriter(path, options) for path in paths]
    try:
        for record in range(num_records):
            start = record * examples_per_record
            writers[record % num_files].write(
                encode_record(columns, start, min(start + examples_per_record, count))
            )
    finally:
        for writer in writers:
            writer.close()
    metadata = {
        'format': FORMAT,
        'examples_per_record': examples_per_record,
        'examples': int(count),
        'records': num_records,
        'files': num_files,
        'bytes': sum(tf.io.gfile.stat(path).length for path in paths),
        'features': {name: spec.dtype.name for name, spec in sorted(feature_spec.items())},
        'seed': seed,
    }
    with tf.io.gfile.GFile(os.path.join(output_dir, METADATA_FILE_NAME), 'w') as f:
        json.dump(metadata, f, indent=2, sort_keys=True)
    return metadata


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
