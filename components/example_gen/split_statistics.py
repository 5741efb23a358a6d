"""TFDV statistics of each split, computed by the ExampleGen from the columns it encodes.

Stock StatisticsGen reads every example back, decodes it to Arrow and runs TFDV over it: at a
million taxi rows that is a component of its own (its time in `docs/bench_pipeline.json`), most
of it reading and decoding. The ExampleGen already holds each chunk's rows as typed Arrow
columns before encoding them, so it hands those to TFDV's `GenerateStatistics`, in the form the
decoder gives them: each value a list of one, a missing cell an empty list (the example holds
the feature with no values), floats as the float32 the example stores. The result is StatisticsGen's artifact, `Split-<name>/FeatureStats.pb`, with
the same statistics (tests/components/example_gen/split_statistics_test.py compares them).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import apache_beam as beam
import numpy as np
import pyarrow as pa

from components.example_gen.feature_types import ColumnType

# StatisticsGen's file name inside each split's folder (tfx.components.statistics_gen.executor).
STATISTICS_FILE_NAME = 'FeatureStats.pb'
# Arrow types as TFXIO decodes tf.Example features (large lists of int64, float32, bytes).
DECODED_TYPES = {
    ColumnType.INT: pa.int64(),
    ColumnType.FLOAT: pa.float32(),
    ColumnType.BYTES: pa.large_binary(),
}


def as_lists(cells: pa.Array, arrow_type: pa.DataType) -> pa.Array:
    """One value per row as TFXIO decodes the ExampleGen's examples: a list of one value, or an
    empty list where the cell is missing (the example holds the feature with no values)."""
    cells = cells.cast(arrow_type)
    present = np.logical_not(cells.is_null().to_numpy(zero_copy_only=False))
    offsets = np.concatenate([[0], np.cumsum(present)]).astype(np.int64)
    return pa.LargeListArray.from_arrays(pa.array(offsets), cells.drop_null())


def record_batch(
    columns: Mapping[str, pa.Array], column_types: Mapping[str, ColumnType], rows: np.ndarray
) -> pa.RecordBatch:
    """The rows selected by the boolean mask `rows`, as the decoder of their examples gives them.
    A column of no type (empty everywhere) is a null column, as its untyped features decode."""
    selected = pa.array(rows)
    count = int(rows.sum())
    return pa.RecordBatch.from_arrays(
        [
            pa.nulls(count)
            if column_types[name] == ColumnType.UNKNOWN
            else as_lists(column.filter(selected), DECODED_TYPES[column_types[name]])
            for name, column in columns.items()
        ],
        list(columns),
    )


def split_path(statistics_dir: str, split: str) -> str:
    return os.path.join(statistics_dir, f'Split-{split}', STATISTICS_FILE_NAME)


class WriteSplitStatistics(beam.PTransform):
    """(split name, RecordBatch) elements in; each split's statistics written as StatisticsGen
    writes them, with TFDV's default options (what StatisticsGen uses unconfigured)."""

    def __init__(self, statistics_dir: str, split_names: Sequence[str]):
        super().__init__()
        self._statistics_dir = statistics_dir
        self._split_names = tuple(split_names)

    def expand(self, batches: beam.PCollection) -> beam.pvalue.PDone:
        import tensorflow_data_validation as tfdv

        for split in self._split_names:
            _ = (
                batches
                | f'Select[{split}]' >> beam.Filter(lambda e, s=split: e[0] == s)
                | f'Batch[{split}]' >> beam.Map(lambda e: e[1])
                | f'GenerateStatistics[{split}]' >> tfdv.GenerateStatistics(tfdv.StatsOptions())
                | f'WriteStatistics[{split}]'
                >> tfdv.WriteStatisticsToBinaryFile(split_path(self._statistics_dir, split))
            )
        return beam.pvalue.PDone(batches.pipeline)
