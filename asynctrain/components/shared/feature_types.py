"""Column types for CSV ExampleGen: read from a schema, or inferred from data as stock does.

INT becomes an int64_list feature, FLOAT a float_list, BYTES a bytes_list (UTF-8 text). A column
whose type could not be inferred (every cell missing) is UNKNOWN and written as an empty
`tf.train.Feature()`, as stock CsvExampleGen writes it.
"""

import enum
from collections.abc import Iterable, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from asynctrain.components.shared.yaml_config import ConfigError


class ColumnType(enum.IntEnum):
    """Feature type of a CSV column; the order is stock's inference lattice."""

    UNKNOWN = 0
    INT = 1
    FLOAT = 2
    BYTES = 3


_SCHEMA_TYPES = {
    schema_pb2.INT: ColumnType.INT,
    schema_pb2.FLOAT: ColumnType.FLOAT,
    schema_pb2.BYTES: ColumnType.BYTES,
}

# Arrow types the cells are converted to. FLOAT parses as float64 and is rounded to float32 when
# encoded, as stock does (Python float() then FloatList), so values agree bit for bit.
ARROW_TYPES = {
    ColumnType.INT: pa.int64(),
    ColumnType.FLOAT: pa.float64(),
    ColumnType.BYTES: pa.string(),
}


def load_schema(schema_path: str) -> schema_pb2.Schema:
    """Reads a text-proto `tensorflow.metadata.v0.Schema` (`asynctrain/schemas/<dataset>/schema.pbtxt`).

    The project's one schema reader (Transform's feature config uses it too).

    Raises:
      ConfigError: naming the file, when it cannot be read or is not a Schema text proto.
    """
    try:
        with open(schema_path, encoding='utf-8') as f:
            return text_format.Parse(f.read(), schema_pb2.Schema())
    except OSError as e:
        raise ConfigError(f'{schema_path}: cannot read the schema: {e.strerror}') from None
    except (text_format.ParseError, UnicodeDecodeError) as e:
        raise ConfigError(f'{schema_path}: not a valid Schema text proto: {e}') from None


def column_types_from_schema(schema: schema_pb2.Schema) -> dict[str, ColumnType]:
    """Maps each feature of the schema to its column type.

    Raises:
      ValueError: a feature has a type other than INT, FLOAT or BYTES.
    """
    types = {}
    for feature in schema.feature:
        if feature.type not in _SCHEMA_TYPES:
            raise ValueError(
                f'schema feature {feature.name!r} has type '
                f'{schema_pb2.FeatureType.Name(feature.type)}; '
                'CSV columns must be INT, FLOAT or BYTES.'
            )
        types[feature.name] = _SCHEMA_TYPES[feature.type]
    return types


def resolve_column_types(
    column_names: Sequence[str], schema_types: Mapping[str, ColumnType]
) -> dict[str, ColumnType]:
    """Types for the CSV's columns from the schema; every column must be in the schema.

    Raises:
      ValueError: naming the CSV columns the schema does not describe.
    """
    missing = [name for name in column_names if name not in schema_types]
    if missing:
        raise ValueError(
            f'CSV columns {missing} are not in the schema; add them to the schema or '
            'run without a schema to infer types.'
        )
    return {name: schema_types[name] for name in column_names}


def _parses_as(cells: pa.Array, arrow_type: pa.DataType) -> bool:
    try:
        pc.cast(cells, arrow_type)
        return True
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False


def infer_column_type(cells: pa.Array) -> ColumnType:
    """The narrowest type every non-missing cell (already UTF-8 `string`) parses as."""
    cells = cells.drop_null()
    if len(cells) == 0:
        return ColumnType.UNKNOWN
    if _parses_as(cells, pa.int64()):
        return ColumnType.INT
    if _parses_as(cells, pa.float64()):
        return ColumnType.FLOAT
    return ColumnType.BYTES


def merge_column_types(per_chunk: Iterable[Mapping[str, ColumnType]]) -> dict[str, ColumnType]:
    """Joins per-chunk inferred types: the widest type wins, as stock's global inference."""
    merged: dict[str, ColumnType] = {}
    for types in per_chunk:
        for name, column_type in types.items():
            merged[name] = max(merged.get(name, ColumnType.UNKNOWN), column_type)
    return merged
