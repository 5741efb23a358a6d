"""The seeded layout of a batched split, and the one-process writer of it.

The layout is a function of the examples' content and the seed, not of the process or runner
that writes it. Each source example (its serialized raw bytes) gets a 64-bit keyed hash (SipHash,
`tf.strings.to_hash_bucket_strong`, keyed by the seed): the example goes to shard
`hash % num_shards`; within a shard, examples are ordered by (hash, bytes) and cut into records
of `examples_per_record` (a shard's last record may hold fewer); shard i is the file
`batches-{i:05d}-of-{n:05d}.gz`. Identical raw examples transform to identical values, so ties
cannot change a byte. A shard is parsed (and transformed) in chunks of whole records counted
from its first sorted example, so every writer calls the transform on the same rows in the same
positions: even a vectorized kernel whose last bits depend on a row's place in its batch writes
the same bytes.

Two writers produce these files byte for byte: `write_split` here (one process; the shards
spilled to local disk, so a shard is the unit of memory) and the Beam pipeline of the
ExampleBatcher (`example_batcher/batching.py`), whose GroupByKey is the shuffle. Both are built
from the functions below: `hashed_batches` (read and hash), `shard_chunks` (deal a batch to
shards) and `write_shard` (sort, transform, encode, write one shard).

Framework-free: tf.data, TF ops and NumPy only.
"""

from __future__ import annotations

import collections
import concurrent.futures
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping

import numpy as np
import tensorflow as tf

from asynctrain.components.shared.example_wire import encode_records

LAYOUT = 'seeded_hash_shards'
RECORDS_FILE_PREFIX = 'batches'
# num_files=0: one shard per SHARD_SOURCE_BYTES of source (GZIP TFRecords), at least MIN_SHARDS.
# A shard is what one process holds in memory while it writes it (its serialized examples, a
# few copies, and their transformed columns): 4 MB of GZIP taxi examples is about 70,000
# examples. With 16 MB, the peak RSS of 5M rows was 1.8 GB against 1.3 GB at 1M rows, whose
# shards were smaller (the floor of 8): 4 MB keeps the shards of both sizes alike (`asynctrain
# bench batcher`). The floor lets a distributed runner write 8 shards in parallel.
SHARD_SOURCE_BYTES = 4 << 20
MIN_SHARDS = 8
# Source records hashed per vectorized call; rows parsed (and transformed) per call are the
# whole records that fit in as many.
READ_BATCH = 8192
# SipHash's 64 bits, less the one that the op's int64 output and modulo drop.
_HASH_RANGE = (1 << 63) - 1

# A shard's share of one batch: (hashes int64 [n], lengths int64 [n], serialized bytes joined).
Chunk = tuple[np.ndarray, np.ndarray, bytes]


def source_files(file_pattern: str) -> list[str]:
    files = sorted(tf.io.gfile.glob(file_pattern))
    if not files:
        raise FileNotFoundError(f'{file_pattern}: no files to read')
    return files


def source_bytes(files: Iterable[str]) -> int:
    return sum(tf.io.gfile.stat(f).length for f in files)


def num_shards(total_source_bytes: int, num_files: int) -> int:
    """The shard (file) count: `num_files`, or with 0 one per SHARD_SOURCE_BYTES of source, at
    least MIN_SHARDS."""
    if num_files < 0:
        raise ValueError(f'num_files: expected >= 0 (0: by size), got {num_files}')
    if num_files:
        return num_files
    return max(MIN_SHARDS, -(-total_source_bytes // SHARD_SOURCE_BYTES))


def shard_path(output_dir: str, shard: int, shards: int) -> str:
    return os.path.join(output_dir, f'{RECORDS_FILE_PREFIX}-{shard:05d}-of-{shards:05d}.gz')


def example_hashes(serialized: tf.Tensor, seed: int) -> tf.Tensor:
    """The seeded 63-bit hash (int64) of each serialized example."""
    key = [seed & 0xFFFFFFFFFFFFFFFF, (seed >> 64) & 0xFFFFFFFFFFFFFFFF]
    return tf.strings.to_hash_bucket_strong(serialized, _HASH_RANGE, key)


def hashed_batches(files: list[str], seed: int, shards: int) -> Iterator[tuple[np.ndarray, ...]]:
    """The examples of GZIP TFRecord files, READ_BATCH at a time, hashed and grouped by shard in
    TF: (examples per shard, hashes, lengths, serialized bytes joined), rows in shard order.
    No example becomes a Python object."""

    @tf.autograph.experimental.do_not_convert
    def deal(serialized: tf.Tensor) -> tuple[tf.Tensor, ...]:
        hashes = example_hashes(serialized, seed)
        shard = hashes % shards
        order = tf.argsort(shard, stable=True)
        ordered = tf.gather(serialized, order)
        return (
            tf.math.bincount(
                tf.cast(shard, tf.int32), minlength=shards, maxlength=shards, dtype=tf.int64
            ),
            tf.gather(hashes, order),
            tf.cast(tf.strings.length(ordered), tf.int64),
            tf.strings.reduce_join(ordered),
        )

    # Files read one after another: reading them in parallel (interleave, 4 at a time) made the
    # ExampleBatcher slower on the 1M-row bench's 32 files on 2 cores (15-23 s against 10-16 s,
    # four runs each). Where an example goes depends on its bytes alone, not on this order.
    batches = (
        tf.data.TFRecordDataset(files, compression_type='GZIP')
        .batch(READ_BATCH)
        .map(deal, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        .prefetch(2)
    )
    yield from batches.as_numpy_iterator()


def shard_chunks(batch: tuple[np.ndarray, ...]) -> Iterator[tuple[int, Chunk]]:
    """Each shard's share of one `hashed_batches` batch, packed (no per-example objects to
    pickle or spill)."""
    counts, hashes, lengths, data = batch
    row_ends = np.cumsum(counts).tolist()
    byte_ends = np.concatenate([[0], np.cumsum(lengths)])
    first = 0
    for shard, end in enumerate(row_ends):
        if end > first:
            chunk_data = data[int(byte_ends[first]) : int(byte_ends[end])]
            yield shard, (hashes[first:end], lengths[first:end], chunk_data)
        first = end


def shard_order(hashes: np.ndarray, row: Callable[[int], bytes]) -> np.ndarray:
    """The order of a shard's examples: by hash, then (for equal hashes) by bytes (`row(i)`:
    the serialized example i)."""
    order = np.argsort(hashes, kind='stable')
    ordered = hashes[order]
    # Each i with ordered[i] == ordered[i + 1]; consecutive i's are one run of equal hashes.
    ties = np.flatnonzero(ordered[1:] == ordered[:-1])
    if ties.size:
        for run in np.split(ties, np.flatnonzero(np.diff(ties) != 1) + 1):
            first, last = int(run[0]), int(run[-1]) + 1
            order[first : last + 1] = sorted(order[first : last + 1], key=row)
    return order


class RowDecoder:
    """Serialized examples to {feature: tensor} (`columns`, a traced function): parsed with `feature_spec`, or, given
    `transform` (a tf.Transform graph's `transform_features_layer()`), parsed with `parse_spec`
    (the raw feature spec) and transformed in the same call; one traced function for every
    batch size."""

    def __init__(
        self,
        feature_spec: Mapping[str, tf.io.FixedLenFeature],
        transform: Callable[[dict], dict] | None = None,
        parse_spec: Mapping[str, tf.io.FixedLenFeature | tf.io.VarLenFeature] | None = None,
    ):
        if transform is not None and parse_spec is None:
            raise ValueError('parse_spec: required with transform (the raw feature spec)')
        names = sorted(feature_spec)
        spec = dict(parse_spec if transform is not None else feature_spec)

        # Not converted by AutoGraph: there is no Python control flow to convert, and converting
        # the transform layer's call tree took 8.7 s of a 1,500-row taxi split's 12.9 s.
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
        def decode(serialized: tf.Tensor) -> dict[str, tf.Tensor]:
            parsed = tf.io.parse_example(serialized, spec)
            columns = transform(parsed) if transform is not None else parsed
            return {name: columns[name] for name in names}

        self.columns = decode


def write_shard(
    path: str, chunks: Iterable[Chunk], decode: RowDecoder, examples_per_record: int
) -> dict:
    """Writes one shard's examples (all its chunks, in any order) as the file `path`; returns
    its examples, records and bytes. An empty shard is an empty file."""
    chunks = list(chunks)
    hashes = np.concatenate([c[0] for c in chunks] or [np.zeros(0, np.int64)])
    lengths = np.concatenate([c[1] for c in chunks] or [np.zeros(0, np.int64)])
    data = b''.join(c[2] for c in chunks)
    del chunks
    starts = np.cumsum(lengths) - lengths
    order = shard_order(hashes, lambda i: data[starts[i] : starts[i] + lengths[i]])
    # The examples as one string tensor, cut out of the joined bytes in TF; the bytes released.
    serialized = tf.strings.substr(tf.constant(data), starts, lengths)
    data = None
    # Chunks of whole records from the shard's first example, decoded (TF, without the GIL)
    # on a thread while the previous chunk is encoded and written.
    step = examples_per_record * max(1, READ_BATCH // examples_per_record)

    def columns(first: int) -> dict[str, np.ndarray]:
        decoded = decode.columns(tf.gather(serialized, order[first : first + step]))
        return {name: t.numpy() for name, t in decoded.items()}

    with (
        concurrent.futures.ThreadPoolExecutor(1) as pool,
        tf.io.TFRecordWriter(path, tf.io.TFRecordOptions(compression_type='GZIP')) as writer,
    ):
        pending = collections.deque(
            pool.submit(columns, first) for first in range(0, min(len(order), 2 * step), step)
        )
        next_first = 2 * step
        while pending:
            decoded = pending.popleft().result()
            if next_first < len(order):
                pending.append(pool.submit(columns, next_first))
                next_first += step
            for record in encode_records(decoded, examples_per_record):
                writer.write(record)
    return {
        'examples': len(order),
        'records': -(-len(order) // examples_per_record),
        'bytes': tf.io.gfile.stat(path).length,
    }


def split_metadata(
    shard_stats: Iterable[Mapping[str, int]],
    features: Mapping[str, str],
    examples_per_record: int,
    shards: int,
    seed: int,
    format_name: str,
) -> dict:
    """The metadata of a split from its shards' `write_shard` results."""
    stats = list(shard_stats)
    return {
        'format': format_name,
        'layout': LAYOUT,
        'examples_per_record': examples_per_record,
        'examples': sum(s['examples'] for s in stats),
        'records': sum(s['records'] for s in stats),
        'files': shards,
        'bytes': sum(s['bytes'] for s in stats),
        'features': dict(sorted(features.items())),
        'seed': seed,
    }


def write_split(
    files: list[str],
    decode: RowDecoder,
    output_dir: str,
    examples_per_record: int,
    shards: int,
    seed: int,
) -> list[dict]:
    """Writes the examples of `files` as `shards` files in `output_dir`, in one process; returns
    each shard's `write_shard` result. The shards are spilled to a local temporary folder
    (removed on exit) unless the whole source fits in one shard's bytes, so memory is bounded by
    a shard."""
    tf.io.gfile.makedirs(output_dir)
    with _Spill(shards, in_memory=source_bytes(files) <= SHARD_SOURCE_BYTES) as spill:
        for batch in hashed_batches(files, seed, shards):
            for shard, chunk in shard_chunks(batch):
                spill.append(shard, chunk)
        return [
            write_shard(
                shard_path(output_dir, shard, shards),
                spill.chunks(shard),
                decode,
                examples_per_record,
            )
            for shard in range(shards)
        ]


class _Spill:
    """Each shard's chunks, in memory or appended to one local file per shard (NumPy arrays,
    no pickle; a file is open only while it is appended to or read, so any shard count fits
    the process's limit of open files)."""

    def __init__(self, shards: int, in_memory: bool):
        self._memory: list[list[Chunk]] | None = [[] for _ in range(shards)] if in_memory else None
        self._shards = shards
        self._dir = ''

    def __enter__(self) -> _Spill:
        if self._memory is None:
            self._dir = tempfile.mkdtemp(prefix='example-batcher-')
        return self

    def __exit__(self, *exc) -> None:
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)

    def _path(self, shard: int) -> str:
        return os.path.join(self._dir, f'{shard:05d}.npy')

    def append(self, shard: int, chunk: Chunk) -> None:
        if self._memory is not None:
            self._memory[shard].append(chunk)
            return
        hashes, lengths, data = chunk
        with open(self._path(shard), 'ab') as f:
            np.save(f, hashes, allow_pickle=False)
            np.save(f, lengths, allow_pickle=False)
            np.save(f, np.frombuffer(data, np.uint8), allow_pickle=False)

    def chunks(self, shard: int) -> list[Chunk]:
        """The shard's chunks, released from memory (or read back from its file, removed)."""
        if self._memory is not None:
            chunks, self._memory[shard] = self._memory[shard], []
            return chunks
        path = self._path(shard)
        if not os.path.exists(path):
            return []
        chunks = []
        with open(path, 'rb') as f:
            size = os.fstat(f.fileno()).st_size
            while f.tell() < size:
                chunks.append((np.load(f), np.load(f), np.load(f).tobytes()))
        os.remove(path)
        return chunks
