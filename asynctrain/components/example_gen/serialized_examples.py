"""The per-example form of `csv_source.CsvToExampleFiles`: one serialized tf.Example per Beam
element, for TFX's generic `BaseExampleGenExecutor.GenerateExamplesByBeam` to split and write."""

import os

# Beam 2.59's type-hint checks understand typing's generics, not collections.abc's, in the
# signatures of functions handed to Beam.
from typing import Iterable  # noqa: UP035

import apache_beam as beam

from asynctrain.components.example_gen import (
    csv_convert,
    csv_records,
    csv_source,
    dead_letter,
    example_encoder,
)
from asynctrain.components.shared.feature_types import ColumnType


class _ChunkToExamples(beam.DoFn):
    """Yields each converted row's serialized example; writes rejected rows to the dead letter."""

    def __init__(self, config: csv_source.CsvSourceConfig):
        self._config = config

    def process(
        self, element: tuple[str, int, csv_records.Chunk], column_types: dict[str, ColumnType]
    ) -> Iterable[bytes]:
        input_split, file_index, planned = element
        config = self._config
        for chunk, data in csv_source.chunks_with_data(planned, config.dialect, config.chunk_bytes):
            converted = csv_convert.convert_chunk(
                data, chunk.first_line, config.dialect, column_types, config.label_column
            )
            if converted.rejected:
                lines = ''.join(
                    dead_letter.to_json_line(chunk.path, row) + '\n' for row in converted.rejected
                )
                csv_source.write_atomically(
                    os.path.join(
                        config.dead_letter_dir,
                        f'rejected-{input_split}-{file_index:05d}-{chunk.index:05d}.jsonl',
                    ),
                    lines.encode('utf-8'),
                )
            encoded = example_encoder.encode_examples(converted.columns, column_types)
            buffer = encoded.buffer.tobytes()
            for start, end in zip(encoded.starts.tolist(), encoded.ends.tolist()):
                yield buffer[start:end]


class CsvToSerializedExamples(csv_source.CsvToExampleFiles):
    """The per-example form: a PCollection of serialized tf.Examples, for TFX's generic
    `BaseExampleGenExecutor.GenerateExamplesByBeam` to split and write. Slower than
    `CsvToExampleFiles` (one Beam element per row), same bytes."""

    def expand(self, pipeline: beam.Pipeline) -> beam.PCollection:
        chunks, column_types = self._chunks_and_types(pipeline)
        return chunks | 'ChunkToExamples' >> beam.ParDo(
            _ChunkToExamples(self._config), column_types
        )
