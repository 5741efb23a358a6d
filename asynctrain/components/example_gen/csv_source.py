"""The Beam transform that converts CSV files to GZIP TFRecord tf.Example splits and a dead letter.

Stages: glob and read headers (at construction, so a bad input fails before the pipeline runs),
'PlanChunks' cuts every file into byte ranges of whole rows (a compressed file, `.gz` and the
others Beam detects by name, is one element: it cannot be read from an offset without
decompressing all before it, so one worker streams it, chunk after chunk), 'Reshuffle' spreads
chunks over workers, 'ConvertChunks' parses, encodes, splits and writes each chunk's rows as files of its
own (one per split) and its rejected rows to the dead letter, and 'SumReports' adds the row
counts into the summary file. With a statistics directory, each chunk's rows also go, as Arrow
columns per split, to TFDV (`split_statistics`): StatisticsGen's output without reading the
examples back; with a Parquet directory, to a Parquet file per chunk and split (`decoded_columns`),
which Transform analyzes without decoding examples. Without a schema, 'InferColumnTypes' first
reads every chunk to type the columns as stock does.

Each chunk writes its own files instead of handing single examples to Beam: per-element Beam
stages (partition, reshuffle, WriteToTFRecord) cost more than parsing and encoding together, so
this keeps one Beam element per chunk of ~8 MB. It runs on any runner; pipeline options pass
through untouched. No TFX imports.
"""

import dataclasses
import json
import os
import zlib

# Beam 2.59's type-hint checks understand typing's generics, not collections.abc's, in the
# signatures of functions handed to Beam.
from collections.abc import Mapping
from typing import Iterable  # noqa: UP035

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from asynctrain.components.example_gen import (
    compression,
    csv_convert,
    csv_dialect,
    csv_records,
    dead_letter,
    decoded_columns,
    example_encoder,
    split_assignment,
    split_statistics,
    tfrecord_writer,
)
from asynctrain.components.shared import feature_types
from asynctrain.components.shared.feature_types import ColumnType

# 8 MB of CSV is ~65k taxi rows: large enough that per-chunk costs vanish, small enough that a
# chunk's buffers (about 10x its size at peak) stay in the low hundreds of MB.
DEFAULT_CHUNK_BYTES = 8 << 20
EXAMPLES_FILE_PREFIX = 'data_tfrecord'


@dataclasses.dataclass(frozen=True)
class CsvSourceConfig:
    """Everything the conversion needs, resolved from TFX protos or CLI flags.

    Attributes:
      input_splits: (name, file glob) per input split; one entry when output splits hash.
      output_splits: (name, hash buckets) per output split; empty to keep the input splits.
      examples_dir: Directory that receives `Split-<name>/` folders.
      dead_letter_dir: Directory that receives `rejected-*.jsonl` files.
      summary_path: Where the JSON summary is written.
      dialect: The CSV dialect.
      column_types: Column types from a schema by name, or None to infer them from the data.
      partition_feature_name: Hash this feature instead of the whole example ('' for none).
      label_column: The label's column ('' for none): a row whose label is missing or does not
        parse goes to the dead letter with its reason.
      chunk_bytes: Target size of the byte ranges parsed as one unit.
      compression_level: zlib level of the output files.
      statistics_dir: Directory that receives each split's TFDV statistics
        (`Split-<name>/FeatureStats.pb`), or None for none.
      parquet_dir: Directory that receives each split's rows again as Parquet files
        (`Split-<name>/data_parquet-*.parquet`, `decoded_columns`), or None for none.
    """

    input_splits: tuple[tuple[str, str], ...]
    output_splits: tuple[tuple[str, int], ...]
    examples_dir: str
    dead_letter_dir: str
    summary_path: str
    dialect: csv_dialect.CsvDialect = csv_dialect.CsvDialect()
    column_types: Mapping[str, ColumnType] | None = None
    partition_feature_name: str = ''
    label_column: str = ''
    chunk_bytes: int = DEFAULT_CHUNK_BYTES
    compression_level: int = tfrecord_writer.DEFAULT_COMPRESSION_LEVEL
    statistics_dir: str | None = None
    parquet_dir: str | None = None

    @property
    def split_names(self) -> list[str]:
        if self.output_splits:
            return [name for name, _ in self.output_splits]
        return [name for name, _ in self.input_splits]


def _open(path: str):
    """The file's bytes, decompressed when its name says it is compressed (`compression`)."""
    return FileSystems.open(path, compression_type=compression.compression_of(path))


def _create(path: str):
    return FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED)


def write_atomically(path: str, payload: bytes) -> None:
    """Writes then renames, so a retried bundle never leaves a half-written file."""
    tmp = path + '.tmp'
    with _create(tmp) as f:
        f.write(payload)
    FileSystems.rename([tmp], [path])


@dataclasses.dataclass(frozen=True)
class _FileInfo:
    split: str
    file_index: int
    path: str
    data_start: int
    first_line: int


def find_input_files(config: CsvSourceConfig) -> tuple[tuple[str, ...], list[_FileInfo]]:
    """Globs every input split and reads the headers; fails early with a clear error.

    Raises:
      FileNotFoundError: a pattern matches no file.
      ValueError: files disagree on the header, or no file holds any data row.
    """
    files: list[_FileInfo] = []
    headers = []
    for split, pattern in config.input_splits:
        matched = FileSystems.match([pattern])[0].metadata_list
        # A local glob also matches directories (e.g. other spans' folders); they hold no rows.
        paths = sorted(
            m.path for m in matched if not m.path.endswith('/') and not os.path.isdir(m.path)
        )
        if not paths:
            raise FileNotFoundError(f'input split {split!r}: pattern {pattern} matches no file')
        for i, path in enumerate(paths):
            names, data_start, first_line = csv_records.locate_data(path, _open, config.dialect)
            headers.append((path, names))
            files.append(_FileInfo(split, i, path, data_start, first_line))
    csv_dialect.check_same_header(headers)
    sizes = {
        m.path: m.size_in_bytes
        for m in FileSystems.match([f.path for f in files])
        for m in m.metadata_list
    }
    if not any(_has_data(f, sizes[f.path]) for f in files):
        raise ValueError('input is empty: no data rows in ' + ', '.join(f.path for f in files))
    return headers[0][1], files


def _has_data(file: _FileInfo, size: int) -> bool:
    """Whether any byte follows the header (a compressed file's size says nothing of that)."""
    if not compression.is_compressed(file.path):
        return size > file.data_start
    with _open(file.path) as f:
        f.seek(file.data_start)
        return bool(f.read(1))


# The `end` of the one element planned for a compressed file: read it to its end as a stream.
TO_END = -1


def _plan(
    file: _FileInfo, dialect: csv_dialect.CsvDialect, chunk_bytes: int
) -> Iterable[tuple[str, int, csv_records.Chunk]]:
    if compression.is_compressed(file.path):
        # No offsets to cut at without decompressing the whole file: one reader converts it all.
        yield (
            file.split,
            file.file_index,
            csv_records.Chunk(file.path, 0, file.data_start, TO_END, file.first_line),
        )
        return
    for chunk in csv_records.plan_chunks(
        file.path, _open, dialect.quote_byte, file.data_start, file.first_line, chunk_bytes
    ):
        yield file.split, file.file_index, chunk


def chunks_with_data(
    planned: csv_records.Chunk, dialect: csv_dialect.CsvDialect, chunk_bytes: int
) -> Iterable[tuple[csv_records.Chunk, bytes]]:
    """A planned chunk with its bytes; for a compressed file, each chunk of it in turn."""
    if planned.end != TO_END:
        yield planned, _read_chunk(planned)
        return
    try:
        with _open(planned.path) as f:
            yield from csv_records.iter_chunks(
                f,
                planned.path,
                dialect.quote_byte,
                planned.start,
                planned.first_line,
                chunk_bytes,
                keep_data=True,
            )
            # Beam's CompressedFile reads a truncated archive to its last whole block without a
            # word; its decompressor knows whether the compressed stream ended.
            decompressor = getattr(f, '_decompressor', None)
            if getattr(decompressor, 'eof', True) is False:
                raise EOFError('the file ends before its compressed stream does (truncated?)')
    except (OSError, EOFError, zlib.error) as e:
        # A truncated or corrupt archive: the rows converted so far are written; the run fails
        # naming the file rather than with the decompressor's bare message.
        kind = compression.compression_of(planned.path)
        raise OSError(f'{planned.path}: cannot be read as {kind}: {e}') from e


def _read_chunk(chunk: csv_records.Chunk) -> bytes:
    """The chunk's bytes; a file that changed since it was planned fails naming it (no row lost)."""
    with _open(chunk.path) as f:
        f.seek(chunk.start)
        data = f.read(chunk.end - chunk.start)
    if len(data) != chunk.end - chunk.start:
        raise OSError(
            f'{chunk.path}: the file changed while it was being converted: expected '
            f'{chunk.end - chunk.start} bytes at offset {chunk.start}, read {len(data)}'
        )
    return data


def _infer_chunk_types(
    element: tuple[str, int, csv_records.Chunk],
    dialect: csv_dialect.CsvDialect,
    names: tuple[str, ...],
    chunk_bytes: int,
) -> dict[str, ColumnType]:
    """Types of one chunk's columns, parsed as UTF-8 text; bad rows do not vote."""
    _, _, planned = element
    as_text = {name: ColumnType.BYTES for name in names}
    per_chunk = []
    for chunk, data in chunks_with_data(planned, dialect, chunk_bytes):
        converted = csv_convert.convert_chunk(data, chunk.first_line, dialect, as_text)
        per_chunk.append(
            {name: feature_types.infer_column_type(converted.columns[name]) for name in names}
        )
    return feature_types.merge_column_types(per_chunk)


# The tagged output of `_ConvertChunk` holding (split name, RecordBatch) for the statistics.
_BATCHES = 'batches'


class _ConvertChunk(beam.DoFn):
    """Converts one chunk to per-split TFRecord files and a dead-letter file; emits its counts,
    and with a statistics directory each split's rows as a RecordBatch (tagged `_BATCHES`)."""

    def __init__(self, config: CsvSourceConfig):
        self._config = config

    def process(
        self, element: tuple[str, int, csv_records.Chunk], column_types: dict[str, ColumnType]
    ) -> Iterable[dead_letter.ChunkReport]:
        input_split, file_index, planned = element
        config = self._config
        for chunk, data in chunks_with_data(planned, config.dialect, config.chunk_bytes):
            report, batches = self._convert(input_split, file_index, chunk, data, column_types)
            yield report
            for batch in batches:
                yield beam.pvalue.TaggedOutput(_BATCHES, batch)

    def _convert(
        self,
        input_split: str,
        file_index: int,
        chunk: csv_records.Chunk,
        data: bytes,
        column_types: dict[str, ColumnType],
    ) -> tuple[dead_letter.ChunkReport, list[tuple[str, object]]]:
        config = self._config
        converted = csv_convert.convert_chunk(
            data, chunk.first_line, config.dialect, column_types, config.label_column
        )
        encoded = example_encoder.encode_examples(
            converted.columns,
            column_types,
            tfrecord_writer.HEADER_BYTES,
            tfrecord_writer.FOOTER_BYTES,
        )
        hash_examples = bool(config.output_splits) and not config.partition_feature_name
        bounds = (
            split_assignment.bucket_bounds([b for _, b in config.output_splits])
            if config.output_splits
            else None
        )
        split_index, crcs = split_assignment.hash_splits_and_crcs(
            encoded.buffer.tobytes(),
            encoded.starts,
            encoded.ends,
            bounds if hash_examples else None,
            tfrecord_writer.google_crc32c.value,
        )
        tfrecord_writer.frame(encoded, crcs)
        if config.partition_feature_name:
            name = config.partition_feature_name
            keys = split_assignment.feature_keys(name, column_types[name], converted.columns[name])
            split_index = split_assignment.splits_of_keys(keys, bounds)
        elif not config.output_splits:
            split_index = np.full(converted.num_rows, config.split_names.index(input_split))
        stem = f'{input_split}-{file_index:05d}-{chunk.index:05d}'
        written = {}
        batches = []
        for i, split in enumerate(config.split_names):
            keep = split_index == i
            count = int(keep.sum())
            written[split] = count
            if count and (config.statistics_dir or config.parquet_dir):
                batch = decoded_columns.record_batch(converted.columns, column_types, keep)
                if config.statistics_dir:
                    batches.append((split, batch))
                if config.parquet_dir:
                    write_atomically(
                        os.path.join(
                            config.parquet_dir,
                            f'Split-{split}',
                            f'{decoded_columns.PARQUET_FILE_PREFIX}-{stem}.parquet',
                        ),
                        decoded_columns.parquet_bytes(batch),
                    )
            if count:
                payload = tfrecord_writer.gzip_bytes(
                    tfrecord_writer.select_records(encoded, keep), config.compression_level
                )
                write_atomically(
                    os.path.join(
                        config.examples_dir, f'Split-{split}', f'{EXAMPLES_FILE_PREFIX}-{stem}.gz'
                    ),
                    payload,
                )
        if converted.rejected:
            lines = ''.join(
                dead_letter.to_json_line(chunk.path, row) + '\n' for row in converted.rejected
            )
            write_atomically(
                os.path.join(config.dead_letter_dir, f'rejected-{stem}.jsonl'),
                lines.encode('utf-8'),
            )
        first = [
            (chunk.path, row.line, dead_letter.describe(chunk.path, row))
            for row in converted.rejected[: dead_letter.FIRST_REJECTED_KEPT]
        ]
        report = dead_letter.ChunkReport(
            converted.num_rows + len(converted.rejected), len(converted.rejected), written, first
        )
        return report, batches


def _merge_types(per_chunk: Iterable[dict[str, ColumnType]]) -> dict[str, ColumnType]:
    return feature_types.merge_column_types(per_chunk)


def _sum_reports(reports: Iterable[dead_letter.ChunkReport]) -> dead_letter.ChunkReport:
    total = dead_letter.ChunkReport()
    for report in reports:
        total = total.merge(report)
    return total


class CsvToExampleFiles(beam.PTransform):
    """Reads CSV files and writes example splits, dead letter and summary (see module doc).

    Returns the PCollection holding the single summed `ChunkReport`.
    """

    def __init__(self, config: CsvSourceConfig):
        super().__init__()
        self._config = config
        self._names, self._files = find_input_files(config)
        if config.column_types is not None:
            self._column_types = feature_types.resolve_column_types(
                self._names, config.column_types
            )
        else:
            self._column_types = None
        for parameter, name in (
            ('partition_feature_name', config.partition_feature_name),
            ('label_column', config.label_column),
        ):
            if name and name not in self._names:
                raise ValueError(f'{parameter} {name!r} is not a column: {list(self._names)}')
        for directory in [
            os.path.join(output_dir, f'Split-{split}')
            for output_dir in (config.examples_dir, config.parquet_dir)
            if output_dir
            for split in config.split_names
        ] + [config.dead_letter_dir]:
            if not FileSystems.exists(directory):
                FileSystems.mkdirs(directory)

    @property
    def column_names(self) -> tuple[str, ...]:
        return self._names

    def _chunks_and_types(self, pipeline: beam.Pipeline):
        config = self._config
        chunks = (
            pipeline
            | 'ListFiles' >> beam.Create(self._files)
            | 'PlanChunks' >> beam.FlatMap(_plan, config.dialect, config.chunk_bytes)
            | 'Reshuffle' >> beam.Reshuffle()
        )
        if self._column_types is not None:
            column_types = beam.pvalue.AsSingleton(
                pipeline | 'SchemaTypes' >> beam.Create([self._column_types])
            )
        else:
            column_types = beam.pvalue.AsSingleton(
                chunks
                | 'InferColumnTypes'
                >> beam.Map(_infer_chunk_types, config.dialect, self._names, config.chunk_bytes)
                | 'MergeColumnTypes' >> beam.CombineGlobally(_merge_types)
            )
        return chunks, column_types

    def expand(self, pipeline: beam.Pipeline) -> beam.PCollection:
        config = self._config
        chunks, column_types = self._chunks_and_types(pipeline)
        converted = chunks | 'ConvertChunks' >> beam.ParDo(
            _ConvertChunk(config), column_types
        ).with_outputs(_BATCHES, main='reports')
        summary = converted.reports | 'SumReports' >> beam.CombineGlobally(_sum_reports)
        if config.statistics_dir is not None:
            _ = converted[_BATCHES] | 'SplitStatistics' >> split_statistics.WriteSplitStatistics(
                config.statistics_dir, config.split_names
            )
        _ = summary | 'WriteSummary' >> beam.Map(
            _write_summary, config.split_names, config.summary_path
        )
        return summary


def _write_summary(
    report: dead_letter.ChunkReport, split_names: list[str], summary_path: str
) -> None:
    payload = dead_letter.summary(report, split_names)
    write_atomically(summary_path, json.dumps(payload, indent=2, sort_keys=True).encode('utf-8'))
