"""A bounded sample of CSV input, read exactly as ExampleGen reads it, into typed Arrow columns.

`asynctrain init` proposes a schema and preprocessing from this sample, so the dialect, the null
markers and the type inference mean the same thing as when ExampleGen converts the files: the
same header parsing, row splitting, cell parsing and inference lattice (INT < FLOAT < BYTES), and
the same compressed files read (`compression`: `.gz`, `.bz2`, ... by name). A larger input is
sampled in byte ranges spread over all of it, never from its head only. No TFX or Beam imports.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import glob
import math
import os
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from asynctrain.components.example_gen import compression, csv_convert, csv_dialect, csv_records
from asynctrain.components.shared import feature_types
from asynctrain.components.shared.feature_types import ColumnType
from asynctrain.components.shared.yaml_config import ConfigError

# Enough rows to see every class of a label and the spread of a column; of a larger input, this
# many rows spread over all of it are read.
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
      chunks: For a sample of a larger input, how many byte ranges spread over every file it was
        read from; 0 for a complete one.
    """

    files: tuple[str, ...]
    columns: dict[str, pa.Array]
    types: dict[str, ColumnType]
    rows: int
    rejected: int
    complete: bool
    chunks: int = 0

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
    files: Sequence[str],
    dialect: csv_dialect.CsvDialect,
    max_rows: int = DEFAULT_MAX_ROWS,
    null_markers: Sequence[str] = (),
) -> CsvSample:
    """Reads up to `max_rows` rows of `files` (`read_text`) and types each column as ExampleGen
    would with the dialect's null markers and `null_markers` besides.

    Raises:
      ConfigError: a file is not CSV (no header, binary content) or the files' headers differ.
    """
    return typed(read_text(files, dialect, max_rows), null_markers)


@dataclasses.dataclass(frozen=True)
class TextSample:
    """The rows of a sample as text, before any type is inferred.

    Attributes:
      files: The CSV files of the input, sorted.
      columns: Column name -> UTF-8 `string` array, null where a cell is empty or is one of the
        dialect's null markers.
      rows: Rows in the sample.
      rejected: Rows that could not be read, not sampled.
      complete: Whether the sample holds every row of every file.
      chunks: For a sample of a larger input: how many byte ranges it was read from, spread over
        every file; 0 for a complete one.
    """

    files: tuple[str, ...]
    columns: dict[str, pa.Array]
    rows: int
    rejected: int
    complete: bool
    chunks: int = 0


def read_text(
    files: Sequence[str], dialect: csv_dialect.CsvDialect, max_rows: int = DEFAULT_MAX_ROWS
) -> TextSample:
    """Every row of `files` when there are at most `max_rows`; otherwise `max_rows` rows spread
    over the whole input (`_spread`), so that a file sorted by a column gives the sample a
    shuffled one would. Rows keep their file order.

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
        if not complete:
            break
        with _reading(path):
            chunks = csv_convert.iter_convert_file(path, dialect, as_text, chunk_bytes=4 << 20)
            try:
                for chunk in chunks:
                    if rows + len(chunk.lines) > max_rows:
                        complete = False
                        break  # the rest is not read (nor, compressed, decompressed) twice
                    rejected += len(chunk.rejected)
                    for name in names:
                        parts[name].append(chunk.columns[name])
                    rows += len(chunk.lines)
            finally:
                chunks.close()
    if not complete:
        return _spread(files, dialect, names, max_rows)
    return TextSample(tuple(files), _concat(names, parts), rows, rejected, complete=True)


# A sample of a larger input is read in byte ranges evenly spaced over all of it, each of at
# least MIN_RANGE_BYTES (a few dozen rows) and small enough that the input holds at most
# MAX_RANGES of them: a sample of 100,000 rows is then read from a few thousand places, so a file
# sorted by a column is seen from end to end.
MIN_RANGE_BYTES = 4 << 10
MAX_RANGES = 20_000
MIN_SPREAD = 100


def _spread(
    files: Sequence[str], dialect: csv_dialect.CsvDialect, names: Sequence[str], max_rows: int
) -> TextSample:
    """`max_rows` rows from byte ranges spread evenly over every file, in file order.

    Every file is scanned once for row boundaries (quote-aware, as ExampleGen cuts its chunks;
    a compressed file is decompressed for it), then only the chosen ranges are converted. The
    ranges are at least MIN_SPREAD and enough to hold about `max_rows` rows, from the bytes per
    row of those read; if they hold more rows, rows evenly spaced among them are kept."""
    range_bytes = max(MIN_RANGE_BYTES, sum(os.path.getsize(path) for path in files) // MAX_RANGES)
    planned = []
    for path in files:
        with _reading(path):
            _, data_start, first_line = csv_records.locate_data(
                path, compression.open_local, dialect
            )
            planned.extend(
                csv_records.plan_chunks(
                    path,
                    compression.open_local,
                    dialect.quote_byte,
                    data_start,
                    first_line,
                    range_bytes,
                )
            )
    total_bytes = sum(chunk.end - chunk.start for chunk in planned)
    as_text = {name: ColumnType.BYTES for name in names}
    # At least MIN_SPREAD ranges (or all there are), then as many as the bytes per row of those
    # read say the budget needs; rows beyond it are dropped evenly.
    wanted = MIN_SPREAD
    while True:
        chosen = sorted(
            set(np.linspace(0, len(planned) - 1, min(wanted, len(planned))).round().astype(int))
        )
        converted = _convert_ranges([planned[i] for i in chosen], dialect, as_text)
        rows = converted.num_rows
        read_bytes = sum(planned[i].end - planned[i].start for i in chosen)
        if rows >= max_rows or len(chosen) == len(planned):
            break
        per_row = read_bytes / max(rows, 1)
        chunk_bytes = total_bytes / len(planned)
        wanted = max(2 * len(chosen), math.ceil(1.1 * max_rows * per_row / chunk_bytes))
    columns = _concat(names, {name: [converted.columns[name]] for name in names})
    if rows > max_rows:
        keep = pa.array(np.linspace(0, rows - 1, max_rows).round().astype(np.int64))
        columns = {name: cells.take(keep) for name, cells in columns.items()}
    return TextSample(
        tuple(files),
        columns,
        min(rows, max_rows),
        len(converted.rejected),
        complete=False,
        chunks=len(chosen),
    )


def _convert_ranges(
    ranges: Sequence[csv_records.Chunk], dialect: csv_dialect.CsvDialect, as_text: dict
) -> csv_convert.ConvertedChunk:
    """The rows of `ranges` (whole rows each, in file order) converted as one block: one parse
    instead of one per range. (Only the count of rejected rows is used: their line numbers are
    not those of the files.)"""
    data = []
    for path in dict.fromkeys(chunk.path for chunk in ranges):
        with _reading(path), compression.open_local(path) as f:
            for chunk in ranges:
                if chunk.path == path:
                    # (A compressed stream seeks forward by decompressing up to the offset.)
                    f.seek(chunk.start)
                    block = f.read(chunk.end - chunk.start)
                    data.append(block if block.endswith(b'\n') else block + b'\n')
    with _reading(ranges[0].path):
        return csv_convert.convert_chunk(b''.join(data), ranges[0].first_line, dialect, as_text)


@contextlib.contextmanager
def _reading(path: str):
    """Turns a failure to read `path` into a ConfigError naming it."""
    try:
        yield
    except (ValueError, UnicodeDecodeError, pa.ArrowInvalid, EOFError) as e:
        raise ConfigError(f'{path}: cannot be read as CSV: {e}') from None
    except OSError as e:
        kind = compression.compression_of(path)
        raise ConfigError(f'{path}: cannot be read as {kind}: {e}') from None


def _concat(names: Sequence[str], parts: dict[str, list[pa.Array]]) -> dict[str, pa.Array]:
    return {
        name: pa.concat_arrays(parts[name]).cast(pa.string())
        if parts[name]
        else pa.array([], pa.string())
        for name in names
    }


def typed(text: TextSample, null_markers: Sequence[str] = ()) -> CsvSample:
    """The sample with each column typed as ExampleGen types it, the cells equal to one of
    `null_markers` read as missing (as ExampleGen reads the dialect's markers)."""
    markers = pa.array(list(null_markers), pa.string())
    columns = {}
    for name, cells in text.columns.items():
        if len(markers):
            cells = pc.if_else(pc.is_in(cells, value_set=markers), None, cells)
        columns[name] = cells
    types = {name: feature_types.infer_column_type(cells) for name, cells in columns.items()}
    columns = {
        name: cells
        if types[name] in (ColumnType.BYTES, ColumnType.UNKNOWN)
        # Stock's lattice: a column typed INT or FLOAT parses in every non-missing cell.
        else pc.cast(cells, feature_types.ARROW_TYPES[types[name]])
        for name, cells in columns.items()
    }
    return CsvSample(
        files=text.files,
        columns=columns,
        types=types,
        rows=text.rows,
        rejected=text.rejected,
        complete=text.complete,
        chunks=text.chunks,
    )
