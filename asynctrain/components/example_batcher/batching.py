"""The ExampleBatcher as a Beam pipeline: one split's examples written in the seeded layout of
`shuffled_shards`, the shuffle done by the runner's own GroupByKey.

Stages: the split's files, spread over workers → `HashExamples` (each file read with tf.data,
its examples hashed by the seed a batch at a time and dealt to shards, each shard's share of a
batch one packed element: no per-example elements) → `GroupByShard` (the runner's GroupByKey,
every shard present even if empty) → `WriteShards` (per shard: order by hash, parse and
transform in large vectorized calls with the graph loaded once per worker in `setup`, encode
with NumPy, write the file with TF's writer, so gs:// and s3:// work from any worker) → the
split's `batched_examples.json`, written by a worker from the shards' counts.

Nothing in a DoFn reads the submitting process's state or local disk: the DoFns carry plain
paths and numbers; the transform graph, the source and the output are read and written at their
URIs. The same seed writes the same files, byte for byte, as `columnar_records.write_split`
(one process) and as this pipeline on any runner with any number of workers.

Framework-free of TFX: Beam, tf.Transform's output reader, TF and NumPy.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import apache_beam as beam
import numpy as np
import tensorflow as tf

from asynctrain.components.shared import columnar_records, shuffled_shards


def load_decoder(transform_graph_uri: str, transform: bool) -> shuffled_shards.RowDecoder:
    """The decoder of a split's examples: raw examples parsed and transformed by the graph
    (`transform`), or transformed examples parsed with its transformed feature spec."""
    import tensorflow_transform as tft

    output = tft.TFTransformOutput(transform_graph_uri)
    if not transform:
        return shuffled_shards.RowDecoder(output.transformed_feature_spec())
    return shuffled_shards.RowDecoder(
        output.transformed_feature_spec(),
        output.transform_features_layer(),
        output.raw_feature_spec(),
    )


class _HashExamples(beam.DoFn):
    """A source file's examples, hashed and dealt to shards a batch at a time."""

    def __init__(self, seed: int, shards: int):
        self._seed = seed
        self._shards = shards

    def process(self, path: str) -> Iterator[tuple[int, shuffled_shards.Chunk]]:
        for batch in shuffled_shards.hashed_batches([path], self._seed, self._shards):
            yield from shuffled_shards.shard_chunks(batch)


class _WriteShard(beam.DoFn):
    """A shard's chunks written as its file; the transform graph loaded once per worker."""

    def __init__(
        self,
        transform_graph_uri: str,
        transform: bool,
        output_dir: str,
        examples_per_record: int,
        shards: int,
    ):
        self._transform_graph_uri = transform_graph_uri
        self._transform = transform
        self._output_dir = output_dir
        self._examples_per_record = examples_per_record
        self._shards = shards
        self._decode: shuffled_shards.RowDecoder | None = None

    def setup(self) -> None:
        self._decode = load_decoder(self._transform_graph_uri, self._transform)

    def process(self, element: tuple[int, Iterable[shuffled_shards.Chunk]]) -> Iterator[dict]:
        shard, chunks = element
        tf.io.gfile.makedirs(self._output_dir)
        yield shuffled_shards.write_shard(
            shuffled_shards.shard_path(self._output_dir, shard, self._shards),
            chunks,
            self._decode,
            self._examples_per_record,
        )


def _write_metadata(stats: list[dict], output_dir: str, **fields) -> dict:
    metadata = shuffled_shards.split_metadata(stats, format_name=columnar_records.FORMAT, **fields)
    columnar_records.write_metadata(output_dir, metadata)
    return metadata


class WriteBatchedSplit(beam.PTransform):
    """Writes one split's examples as batched records in the seeded layout; the output is the
    split's metadata (one dict), which is also written beside the files."""

    def __init__(
        self,
        source_files: list[str],
        output_dir: str,
        transform_graph_uri: str,
        transform: bool,
        features: dict[str, str],
        examples_per_record: int,
        shards: int,
        seed: int,
    ):
        """Args:
        source_files: The split's GZIP TFRecord files of `tf.Example`s.
        output_dir: Where the split's files and metadata go (any filesystem TF writes).
        transform_graph_uri: The tf.Transform output (`transform_graph` artifact).
        transform: Whether the examples are raw and transformed here by the graph.
        features: Feature name to dtype name, recorded in the metadata.
        examples_per_record: Examples per record.
        shards: Files of the split (`shuffled_shards.num_shards`).
        seed: Seed of the hash that lays the examples out.
        """
        super().__init__()
        if not source_files:
            raise ValueError(f'{output_dir}: no source files to write from')
        self._source_files = list(source_files)
        self._output_dir = output_dir
        self._transform_graph_uri = transform_graph_uri
        self._transform = bool(transform)
        self._features = dict(features)
        self._examples_per_record = examples_per_record
        self._shards = shards
        self._seed = seed

    def expand(self, root: beam.pvalue.PBegin) -> beam.PCollection[dict]:
        chunks = (
            root
            | 'SourceFiles' >> beam.Create(self._source_files)
            | 'SpreadFiles' >> beam.Reshuffle()
            | 'HashExamples' >> beam.ParDo(_HashExamples(self._seed, self._shards))
        )
        # Every shard gets a key (and an empty chunk, of the same type as the others, so that
        # Flatten joins PCollections of one element type), so an empty shard still writes its
        # (empty) file.
        empty = (np.zeros(0, np.int64), np.zeros(0, np.int64), b'')
        every_shard = root | 'EveryShard' >> beam.Create([(i, empty) for i in range(self._shards)])
        return (
            (chunks, every_shard)
            | 'AllShards' >> beam.Flatten()
            | 'GroupByShard' >> beam.GroupByKey()
            | 'WriteShards'
            >> beam.ParDo(
                _WriteShard(
                    self._transform_graph_uri,
                    self._transform,
                    self._output_dir,
                    self._examples_per_record,
                    self._shards,
                )
            )
            | 'GatherCounts' >> beam.combiners.ToList()
            | 'WriteMetadata'
            >> beam.Map(
                _write_metadata,
                output_dir=self._output_dir,
                features=self._features,
                examples_per_record=self._examples_per_record,
                shards=self._shards,
                seed=self._seed,
            )
        )
