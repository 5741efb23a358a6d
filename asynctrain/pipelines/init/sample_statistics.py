"""TFDV statistics of a CSV sample (`asynctrain init`), computed as StatisticsGen computes them
from ExampleGen's examples: each cell a list of one value, a missing cell a missing feature."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
from tensorflow_metadata.proto.v0 import statistics_pb2

from asynctrain.components.example_gen.csv_sample import CsvSample
from asynctrain.components.shared.feature_types import ARROW_TYPES, ColumnType


def as_lists(cells: pa.Array, column_type: ColumnType) -> pa.Array:
    """One value per row as TFXIO presents a feature to TFDV: a list of one value, or a null list
    where the cell is missing (a missing feature, not a list holding a null)."""
    if column_type == ColumnType.UNKNOWN:
        cells = pa.nulls(len(cells), pa.string())
    else:
        cells = cells.cast(ARROW_TYPES[column_type])
    missing = cells.is_null()
    present = np.logical_not(missing.to_numpy(zero_copy_only=False))
    offsets = np.concatenate([[0], np.cumsum(present)]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), cells.drop_null(), mask=missing)


def statistics(
    sample: CsvSample, names: Sequence[str], rows: np.ndarray | None = None
) -> statistics_pb2.DatasetFeatureStatisticsList:
    """TFDV's statistics of the columns `names` of `sample`, over `rows` (indices; all by default)."""
    import tensorflow_data_validation as tfdv
    from tensorflow_data_validation.statistics import stats_impl

    columns = [sample.columns[name] for name in names]
    if rows is not None:
        columns = [column.take(pa.array(rows)) for column in columns]
    batch = pa.RecordBatch.from_arrays(
        [as_lists(column, sample.types[name]) for column, name in zip(columns, names)],
        list(names),
    )
    return stats_impl.generate_statistics_in_memory(batch, tfdv.StatsOptions())
