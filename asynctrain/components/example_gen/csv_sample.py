"""A bounded sample of CSV input, read exactly as ExampleGen reads it, into typed Arrow columns.

`asynctrain init` proposes a schema and preprocessing from this sample, so the dialect, the null
markers and the type inference mean the same thing as when ExampleGen converts the files: the
same header parsing, row splitting, cell parsing and inference lattice (INT < FLOAT < BYTES), and
the same compressed files read (`compression`: `.gz`, `.bz2`, ... by name).
No TFX or Beam imports.
"""

from __future__ import annotations

import csv
import dataclasses
import glob
import os
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from asynctrain.components.example_gen import compression, csv_convert, csv_dialect, csv_records
from asynctrain.components.shared import feature_types
from asynctrain.components.shared.feature_types import ColumnType
from asynctrain.components.shared.yaml_config import ConfigError

# Enough rows to see every class of a label and the spread of a column; a larger input is read
# from its first files up to this many rows.
DEFAULT_MAX_ROWS = 100_000


@dataclasses.dataclass(frozen=True)
class CsvSample:
    """The rows read and their types.

    Attributes:
      files: The CSV files of the input, sorted.
      columns: Column name -> typed Arrow array (nulls where a cell is missing).
      types: Column name -> the type inferred over the sample, as ExampleGen infers it.
      rows: Rows in the sample.
      rejected: Rows that could not be read (wrong number of cells, bad quoting), not sampled.
      complete: Whether the sample holds every row of every file.
    """

    files: tuple[str, ...]
    columns: dict[str, pa.Array]
    types: dict[str, ColumnType]
    rows: int
    rejected: int
    complete: bool

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.columns)


def input_files(data_dir: str) -> list[str]:
    """The input files under `data_dir` (every regular, non-hidden file), sorted."""
    if not os.path.isdir(data_dir):
        raise ConfigError(f'{data_dir}: not a directory of CSV files')
    files = sorted(
        path
        for path in glob.glob(os.path.join(data_dir, '*'))
        if os.path.isfile(path) and not os.path.basename(path).startswith('.')
    )
    if not files:
        raise ConfigError(f'{data_dir}: no input files')
    return files


def _header(path: str, dialect: csv_dialect.CsvDialect) -> tuple[str, ...]:
    try:
        names, _, _ = csv_records.locate_data(path, compression.open_local, dialect)
    except (ValueError, UnicodeDecodeError, csv.Error, EOFError) as e:
        raise ConfigError(f'{path}: not a CSV file with a header row: {e}') from None
    except OSError as e:  # a `.gz` that is not gzip, a truncated `.bz2`, ...
        raise ConfigError(
            f'{path}: cannot be read as {compression.compression_of(path)}: {e}'
        ) from None
    if len(names) < 2:
        raise ConfigError(
            f'{path}: not a CSV file of at least two columns with the delimiter '
            f'{dialect.delimiter!r}: the header has {len(names)} column(s): {list(names)[:3]}'
        )
    return tuple(names)


def read_sample(
    files: Sequence[str], dialect: csv_dialect.CsvDialect, max_rows: int = DEFAULT_MAX_ROWS
) -> CsvSample:
    """Reads up to `max_rows` rows of `files` in order and types each column as ExampleGen would.

    Raises:
      ConfigError: a file is not CSV (no header, binary content) or the files' headers differ.
    """
    headers = [(path, _header(path, dialect)) for path in files]
    try:
        csv_dialect.check_same_header(headers)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    names = headers[0][1]
    as_text = {name: ColumnType.BYTES for name in names}
    parts: dict[str, list[pa.Array]] = {name: [] for name in names}
    rows = rejected = 0
    complete = True
    for path in files:
        if rows >= max_rows:
            complete = False
            break
        chunks = csv_convert.iter_convert_file(path, dialect, as_text, chunk_bytes=4 << 20)
        try:
            for chunk in chunks:
                rejected += len(chunk.rejected)
                take = min(len(chunk.lines), max_rows - rows)
                if take < len(chunk.lines):
                    complete = False
                for name in names:
                    parts[name].append(chunk.columns[name].slice(0, take))
                rows += take
                if rows >= max_rows:
                    break  # rows past the sample are not read (nor, compressed, decompressed)
        except (ValueError, UnicodeDecodeError, pa.ArrowInvalid, EOFError) as e:
            raise ConfigError(f'{path}: cannot be read as CSV: {e}') from None
        except OSError as e:
            kind = compression.compression_of(path)
            raise ConfigError(f'{path}: cannot be read as {kind}: {e}') from None
        finally:
            chunks.close()
    text = {name: pa.concat_arrays(arrays).cast(pa.string()) for name, arrays in parts.items()}
    types = {name: feature_types.infer_column_type(cells) for name, cells in text.items()}
    columns = {
        name: cells
        if types[name] in (ColumnType.BYTES, ColumnType.UNKNOWN)
        # Stock's lattice: a column typed INT or FLOAT parses in every non-missing cell.
        else pc.cast(cells, feature_types.ARROW_TYPES[types[name]])
        for name, cells in text.items()
    }
    return CsvSample(
        files=tuple(files),
        columns=columns,
        types=types,
        rows=rows,
        rejected=rejected,
        complete=complete,
    )
