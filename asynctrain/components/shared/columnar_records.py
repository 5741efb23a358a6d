"""Pre-batched examples: each record holds many examples, column by column.

Transform writes one `tf.Example` per example, so a training step of 256 examples parses 256
protos, and on a small machine parsing is what the accelerator waits for (`asynctrain bench
input`). Here a record is one `tf.Example` whose every feature holds the values of up to
`examples_per_record` examples, in order (a scalar feature: one value per example; a feature of
shape [d]: d values per example, example after example). A step then parses about one record.
The records are still plain GZIP TFRecords of `tf.Example`s that any TFRecord tool can read.

Writing (`write_split`): one split's examples are parsed in large vectorized batches (raw
examples are transformed in the same call by their tf.Transform graph, so Transform itself need
not materialize anything), shuffled as a whole (a seed fixes the order, so a rerun writes the
same bytes), cut into records and dealt round-robin over `num_files` files. Memory is bounded by
a shuffle bucket, not by the split: the examples are dealt to random buckets spilled to local
disk, then each bucket is permuted and written. Plain tf.data and NumPy, no Beam: one process
writes a split faster than a Beam pipeline starts; NumPy lays the records out in the wire format
(`example_wire`).

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
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping

import numpy as np
import tensorflow as tf

from asynctrain.components.shared.example_wire import encode_records

FORMAT = 'columnar_tf_example'
METADATA_FILE_NAME = 'batched_examples.json'
RECORDS_FILE_PREFIX = 'batches'
DEFAULT_EXAMPLES_PER_RECORD = 256
DEFAULT_NUM_FILES = 8
# Source records parsed (and transformed) per vectorized call while reading a split to write it.
_READ_BATCH = 8192
# Source bytes (GZIP TFRecords) per shuffle bucket: a bucket of raw taxi examples is about
# 200,000 examples, 10-20 MB of transformed columns in memory.
BUCKET_SOURCE_BYTES = 16 << 20


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


def _source_files(file_pattern: str) -> list[str]:
    files = sorted(tf.io.gfile.glob(file_pattern))
    if not files:
        raise FileNotFoundError(f'{file_pattern}: no files to read')
    return files


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
        tf.data.TFRecordDataset(_source_files(file_pattern), compression_type='GZIP')
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
    bucket_source_bytes: int = BUCKET_SOURCE_BYTES,
) -> dict:
    """Writes the examples matching `source_pattern`, shuffled, as batched records in
    `output_dir`; returns the metadata it writes beside them.

    `feature_spec` is what the records hold. The source is parsed with it, or, given `transform`
    (raw examples and their tf.Transform graph's `transform_features_layer()`), parsed with
    `parse_spec` (the raw feature spec) and transformed batch by batch on the way.

    Memory is bounded by a bucket, not by the split: the examples are dealt to random buckets
    (one per `bucket_source_bytes` of source files, spilled to a local temporary folder), then each
    bucket is permuted and written in turn. Dealing to random buckets and permuting each is a
    uniform shuffle of the whole split; a split of one bucket stays in memory.
    """
    if examples_per_record < 1:
        raise ValueError(f'examples_per_record: expected >= 1, got {examples_per_record}')
    if num_files < 1:
        raise ValueError(f'num_files: expected >= 1, got {num_files}')
    _check_feature_spec(feature_spec)
    if transform is not None and parse_spec is None:
        raise ValueError('parse_spec: required with transform (the raw feature spec)')
    source_bytes = sum(tf.io.gfile.stat(f).length for f in _source_files(source_pattern))
    num_buckets = max(1, -(-source_bytes // bucket_source_bytes))
    rng = np.random.default_rng(seed)
    batches = column_batches(
        source_pattern, parse_spec if transform is not None else feature_spec, transform
    )
    tf.io.gfile.makedirs(output_dir)
    with _Buckets(num_buckets) as buckets:
        for batch in batches:
            buckets.deal({name: batch[name] for name in feature_spec}, rng)
        count = buckets.count
        num_records = -(-count // examples_per_record)
        num_files = max(1, min(num_files, num_records))
        paths = [
            os.path.join(output_dir, f'{RECORDS_FILE_PREFIX}-{i:05d}-of-{num_files:05d}.gz')
            for i in range(num_files)
        ]
        options = tf.io.TFRecordOptions(compression_type='GZIP')
        writers = [tf.io.TFRecordWriter(path, options) for path in paths]
        try:
            record = 0
            for columns in _records_of(buckets.permuted(rng), examples_per_record):
                for serialized in encode_records(columns, examples_per_record):
                    writers[record % num_files].write(serialized)
                    record += 1
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


class _Buckets:
    """Examples dealt to `num_buckets` random buckets: kept in memory when there is one, else
    appended batch by batch to one file per bucket in a local temporary folder (removed on
    exit), wherever the output goes."""

    def __init__(self, num_buckets: int):
        self.num_buckets = num_buckets
        self.count = 0
        self._spill_dir = ''
        self._memory: list[dict[str, np.ndarray]] = []
        self._files: list = []
        self._names: list[str] = []
        self._strings: set[str] = set()

    def __enter__(self) -> _Buckets:
        if self.num_buckets > 1:
            self._spill_dir = tempfile.mkdtemp(prefix='example-batcher-')
            self._files = [
                open(os.path.join(self._spill_dir, f'{i:05d}.npy'), 'w+b')  # noqa: SIM115
                for i in range(self.num_buckets)
            ]
        return self

    def __exit__(self, *exc) -> None:
        for f in self._files:
            f.close()
        if self._files:
            shutil.rmtree(self._spill_dir, ignore_errors=True)

    def deal(self, columns: dict[str, np.ndarray], rng: np.random.Generator) -> None:
        rows = len(next(iter(columns.values())))
        self.count += rows
        self._names = sorted(columns)
        self._strings = {name for name, values in columns.items() if values.dtype == object}
        if self.num_buckets == 1:
            self._memory.append(columns)
            return
        bucket_of = rng.integers(0, self.num_buckets, rows)
        for bucket, f in enumerate(self._files):
            chosen = bucket_of == bucket
            if chosen.any():
                for name in self._names:
                    _spill(f, columns[name][chosen])

    def _read(self, bucket: int) -> dict[str, np.ndarray]:
        if self.num_buckets == 1:
            parts = self._memory
            self._memory = []
        else:
            f = self._files[bucket]
            size = f.tell()
            f.seek(0)
            parts = []
            while f.tell() < size:
                parts.append({name: _unspill(f, name in self._strings) for name in self._names})
        if not parts:
            return {}
        return {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}

    def permuted(self, rng: np.random.Generator) -> Iterator[dict[str, np.ndarray]]:
        """Each bucket in turn, its rows in a random order."""
        for bucket in range(self.num_buckets):
            columns = self._read(bucket)
            if columns:
                order = rng.permutation(len(next(iter(columns.values()))))
                yield {name: values[order] for name, values in columns.items()}


def _spill(f, values: np.ndarray) -> None:
    """Appends `values` to `f` without pickling: numbers as one array; strings (object arrays of
    bytes) as their shape, their lengths and their concatenated bytes."""
    if values.dtype != object:
        np.save(f, values, allow_pickle=False)
        return
    flat = [bytes(v) for v in values.reshape(-1)]
    np.save(f, np.array(values.shape, dtype=np.int64), allow_pickle=False)
    np.save(f, np.array([len(v) for v in flat], dtype=np.int64), allow_pickle=False)
    np.save(f, np.frombuffer(b''.join(flat), dtype=np.uint8), allow_pickle=False)


def _unspill(f, strings: bool) -> np.ndarray:
    """The next array `_spill` appended to `f`; `strings`: whether it was an object array.
    (`np.load` refuses pickled data by default.)"""
    first = np.load(f)
    if not strings:
        return first
    shape = tuple(int(n) for n in first)
    lengths = np.load(f)
    data = np.load(f).tobytes()
    ends = np.cumsum(lengths)
    values = np.empty(len(lengths), dtype=object)
    values[:] = [data[end - n : end] for n, end in zip(lengths.tolist(), ends.tolist())]
    return values.reshape(shape)


def _records_of(
    parts: Iterator[dict[str, np.ndarray]], examples_per_record: int
) -> Iterator[dict[str, np.ndarray]]:
    """The rows of consecutive `parts`, regrouped so that every group but the last holds whole
    records of `examples_per_record` rows; a record may span two parts."""
    carry: dict[str, np.ndarray] | None = None
    for part in parts:
        if carry is not None:
            part = {name: np.concatenate([carry[name], part[name]]) for name in part}
        rows = len(next(iter(part.values())))
        full = rows - rows % examples_per_record
        if full:
            yield {name: values[:full] for name, values in part.items()}
        carry = {name: values[full:] for name, values in part.items()} if full < rows else None
    if carry is not None:
        yield carry


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
