"""Each split's rows in the Arrow form TFXIO decodes the ExampleGen's examples to, and the Parquet
files that hold them.

The ExampleGen holds each chunk's rows as typed Arrow columns before encoding them as
`tf.Example`s. Two consumers want those rows back as Arrow, and reading the examples back to get
them is most of what they would cost: TFDV's statistics (`split_statistics`) and Transform's
analysis, which reads the `parquet_examples` output written here (TFX's FORMAT_PARQUET payload,
read by tfx_bsl's `ParquetTFXIO` in C++ a row group at a time) instead of decoding every
`tf.Example` in Python. The form is the decoder's: each value a list of one, a missing cell an empty
list (the example holds the feature with no values), floats as the float32 the example stores, so
both consumers see exactly what they would have decoded (tests/components/example_gen/
parquet_examples_test.py and split_statistics_test.py compare them).
"""

from __future__ import annotations

import io
from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from asynctrain.components.shared.feature_types import ColumnType

# Arrow types as TFXIO decodes tf.Example features (large lists of int64, float32, bytes).
DECODED_TYPES = {
    ColumnType.INT: pa.int64(),
    ColumnType.FLOAT: pa.float32(),
    ColumnType.BYTES: pa.large_binary(),
}
# The Parquet files' prefix inside each `Split-<name>/` folder of `parquet_examples`.
PARQUET_FILE_PREFIX = 'data_parquet'
# tfx_bsl's name of the file format, recorded on the artifact (`examples_utils.set_file_format`).
PARQUET_FILE_FORMAT = 'FILE_FORMAT_PARQUET'


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


def parquet_bytes(batch: pa.RecordBatch) -> bytes:
    """`batch` as a Parquet file of one row group: a reader holds one chunk's rows at a time, so
    its memory is bounded by the ExampleGen's chunk size, not by the split."""
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_batches([batch]), buffer, row_group_size=max(batch.num_rows, 1))
    return buffer.getvalue()
