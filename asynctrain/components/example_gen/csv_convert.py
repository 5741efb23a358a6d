"""Turns the bytes of one CSV chunk into typed Arrow columns plus the rows it rejects.

The fast path is one vectorized pass: numpy finds rows and counts cells (`csv_records`), pyarrow
parses every cell as bytes, and one Arrow cast per column converts it to the column's type. Only
when something is wrong does slower work run, and only on the part that is wrong: a cast that
fails is bisected to the bad cells; a row whose quote never closes is cut to its first line and
parsing resumes on the next line. Every row ends up either converted or rejected with a reason.
"""

import io
from collections.abc import Iterator, Mapping, Sequence
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import csv as pa_csv

from asynctrain.components.example_gen import compression, csv_dialect, csv_records
from asynctrain.components.shared.feature_types import ARROW_TYPES, ColumnType

_ARROW_BLOCK_BYTES = 4 << 20


class RejectedRow(NamedTuple):
    """A row that could not be converted.

    Attributes:
      line: 1-based physical line number in its file where the row starts.
      reason: Why it was rejected, e.g. "wrong column count: 3 of 18".
      raw: The row's bytes as they are in the file (without the line break).
    """

    line: int
    reason: str
    raw: bytes


class ConvertedChunk(NamedTuple):
    """Result of converting one chunk.

    Attributes:
      columns: Typed Arrow arrays in CSV column order, one entry per converted row; null where a
        cell was missing. UNKNOWN columns are all-null `pa.null()` arrays.
      lines: Line number of each converted row.
      rejected: Rows that were not converted, in line order.
    """

    columns: dict[str, pa.Array]
    lines: np.ndarray
    rejected: list[RejectedRow]

    @property
    def num_rows(self) -> int:
        return len(self.lines)


def _find_rows(
    data: bytes, dialect: csv_dialect.CsvDialect, num_columns: int, first_line: int
) -> tuple[csv_records.Records, list[RejectedRow]]:
    """Finds rows with the right cell count; cuts rows with a runaway quote to one bad line."""
    buf = np.frombuffer(data, np.uint8)
    newlines = np.flatnonzero(buf == 10)
    quotes = (
        np.flatnonzero(buf == dialect.quote_byte)
        if dialect.quote_byte is not None
        else np.zeros(0, np.int64)
    )
    delimiters = np.flatnonzero(buf == dialect.delimiter_byte)
    parts: list[csv_records.Records] = []
    rejected: list[RejectedRow] = []
    offset = 0
    while offset < len(data):
        records = csv_records.split_records_from(buf, newlines, quotes, delimiters, offset)
        runaway = records.unbalanced | (
            (records.num_lines > 1) & (records.num_fields != num_columns)
        )
        bad = np.flatnonzero(runaway)
        if not len(bad):
            parts.append(records)
            break
        i = int(bad[0])
        parts.append(csv_records.Records(*(field[:i] for field in records)))
        start = int(records.starts[i])
        line_end = (
            int(newlines[np.searchsorted(newlines, start)])
            if records.num_lines[i] > 1
            else (int(records.ends[i]))
        )
        raw = data[start:line_end].rstrip(b'\r')
        rejected.append(
            RejectedRow(
                first_line + int(records.line_offsets[i]),
                'unbalanced quote: a quoted cell opened on this line never '
                'closes within a row of the right column count',
                raw,
            )
        )
        offset = line_end + 1
    merged = csv_records.Records(*(np.concatenate(fields) for fields in zip(*parts)))
    return merged, rejected


def _read_cells(
    data: bytes, names: Sequence[str], dialect: csv_dialect.CsvDialect, multiline: bool
) -> pa.Table:
    """Parses rows into `binary` columns; missing cells and null markers become null."""
    return pa_csv.read_csv(
        io.BytesIO(data),
        read_options=pa_csv.ReadOptions(column_names=list(names), block_size=_ARROW_BLOCK_BYTES),
        parse_options=pa_csv.ParseOptions(
            delimiter=dialect.delimiter,
            quote_char=dialect.quote_char if dialect.quote_char is not None else False,
            double_quote=True,
            newlines_in_values=multiline,
            ignore_empty_lines=True,
        ),
        convert_options=pa_csv.ConvertOptions(
            column_types={name: pa.binary() for name in names},
            null_values=[''] + list(dialect.null_markers),
            strings_can_be_null=True,
            quoted_strings_can_be_null=True,
        ),
    )


def _bad_indices(cells: pa.Array, arrow_type: pa.DataType, base: int = 0) -> list[int]:
    """Indices of the cells that do not cast, by bisection: O(bad * log n) casts."""
    try:
        pc.cast(cells, arrow_type)
        return []
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        if len(cells) == 1:
            return [base]
    half = len(cells) // 2
    return _bad_indices(cells.slice(0, half), arrow_type, base) + _bad_indices(
        cells.slice(half), arrow_type, base + half
    )


def _describe_cell(value: bytes | None, column: str, column_type: ColumnType, what: str) -> str:
    if column_type == ColumnType.BYTES:
        return f'{what} {column!r}: not valid UTF-8'
    text = value.decode('utf-8', 'backslashreplace') if value is not None else ''
    return f'{what} {column!r}: {text[:40]!r} is not {column_type.name}'


def _join_rows(data: bytes, starts: np.ndarray, ends: np.ndarray) -> bytes:
    return b'\n'.join(data[s:e] for s, e in zip(starts.tolist(), ends.tolist())) + b'\n'


def convert_chunk(
    data: bytes,
    first_line: int,
    dialect: csv_dialect.CsvDialect,
    column_types: Mapping[str, ColumnType],
    label_column: str = '',
) -> ConvertedChunk:
    """Converts the rows of one chunk (whole rows, no header) to typed columns.

    Args:
      data: The chunk's bytes.
      first_line: Line number of the chunk's first row in its file.
      dialect: The CSV dialect.
      column_types: Column names in CSV order and their types.
      label_column: The label's column, or ''. A row whose label is missing (empty cell or null
        marker) or does not parse as its type is rejected with the reason
        `label 'NAME' is missing` or `label 'NAME': 'TEXT' is not INT`: it never reaches
        training with a made-up label.
    """
    names = list(column_types)
    records, rejected = _find_rows(data, dialect, len(names), first_line)
    blank = records.ends == records.starts
    wrong_count = ~blank & (records.num_fields != len(names))
    for i in np.flatnonzero(wrong_count).tolist():
        rejected.append(
            RejectedRow(
                first_line + int(records.line_offsets[i]),
                f'wrong column count: {int(records.num_fields[i])} of {len(names)}',
                data[records.starts[i] : records.ends[i]],
            )
        )
    good = ~blank & ~wrong_count
    rows = _Rows(records.starts[good], records.ends[good], first_line + records.line_offsets[good])
    multiline = bool((records.num_lines[good] > 1).any())
    if not len(rows.lines):
        return _cast_columns(_empty_table(names), data, rows, column_types, rejected, label_column)
    # The chunk's own bytes are parsed as they are unless rows had to be taken out.
    row_bytes = data if not rejected else _join_rows(data, rows.starts, rows.ends)
    try:
        table = _read_cells(row_bytes, names, dialect, multiline)
        if table.num_rows == len(rows.lines):
            return _cast_columns(table, data, rows, column_types, rejected, label_column)
    except pa.ArrowInvalid:
        pass
    return _convert_by_bisection(data, rows, dialect, column_types, rejected, label_column)


class _Rows(NamedTuple):
    """Aligned arrays locating rows in a chunk's bytes: content start, end, line number."""

    starts: np.ndarray
    ends: np.ndarray
    lines: np.ndarray

    def take(self, index) -> '_Rows':
        return _Rows(self.starts[index], self.ends[index], self.lines[index])


def _empty_table(names: Sequence[str]) -> pa.Table:
    return pa.table({name: pa.array([], pa.binary()) for name in names})


def _convert_by_bisection(
    data: bytes,
    rows: _Rows,
    dialect: csv_dialect.CsvDialect,
    column_types: Mapping[str, ColumnType],
    rejected: list[RejectedRow],
    label_column: str = '',
) -> ConvertedChunk:
    """Slow path: parses halves of the rows recursively, rejecting rows Arrow cannot parse."""
    names = list(column_types)
    tables: list[pa.Table] = []
    kept: list[np.ndarray] = []

    def parse(lo: int, hi: int) -> None:
        try:
            table = _read_cells(
                _join_rows(data, rows.starts[lo:hi], rows.ends[lo:hi]), names, dialect, True
            )
            if table.num_rows == hi - lo:
                tables.append(table)
                kept.append(np.arange(lo, hi))
                return
            error = f'Arrow reads it as {table.num_rows} rows'
        except pa.ArrowInvalid as e:
            error = str(e).splitlines()[0]
        if hi - lo == 1:
            rejected.append(
                RejectedRow(
                    int(rows.lines[lo]),
                    f'unparseable row: {error}',
                    data[rows.starts[lo] : rows.ends[lo]],
                )
            )
            return
        mid = (lo + hi) // 2
        parse(lo, mid)
        parse(mid, hi)

    parse(0, len(rows.lines))
    if not tables:
        return _cast_columns(
            _empty_table(names), data, rows.take(slice(0, 0)), column_types, rejected, label_column
        )
    return _cast_columns(
        pa.concat_tables(tables),
        data,
        rows.take(np.concatenate(kept)),
        column_types,
        rejected,
        label_column,
    )


def _cast_columns(
    table: pa.Table,
    data: bytes,
    rows: _Rows,
    column_types: Mapping[str, ColumnType],
    rejected: list[RejectedRow],
    label_column: str = '',
) -> ConvertedChunk:
    """Casts each `binary` column to its type, rejecting the rows whose cells do not cast and,
    with `label_column`, the rows without a label."""
    bad_rows: dict[int, str] = {}
    raw_columns = {name: table.column(name).combine_chunks() for name in column_types}
    if label_column:
        # The label's reason comes first: it is the one that says why the row cannot train.
        missing = raw_columns[label_column].is_null().to_numpy(zero_copy_only=False)
        for i in np.flatnonzero(missing).tolist():
            bad_rows[i] = f'label {label_column!r} is missing'
    for name, column_type in sorted(column_types.items(), key=lambda item: item[0] != label_column):
        if column_type == ColumnType.UNKNOWN:
            continue
        what = 'label' if name == label_column else 'column'
        for i in _bad_indices(raw_columns[name], ARROW_TYPES[column_type]):
            bad_rows.setdefault(
                i, _describe_cell(raw_columns[name][i].as_py(), name, column_type, what)
            )
    if bad_rows:
        for i, reason in sorted(bad_rows.items()):
            rejected.append(
                RejectedRow(int(rows.lines[i]), reason, data[rows.starts[i] : rows.ends[i]])
            )
        keep = np.ones(len(rows.lines), bool)
        keep[list(bad_rows)] = False
        keep_indices = pa.array(np.flatnonzero(keep))
        raw_columns = {name: column.take(keep_indices) for name, column in raw_columns.items()}
        rows = rows.take(keep)
    columns = {}
    for name, column_type in column_types.items():
        if column_type == ColumnType.UNKNOWN:
            columns[name] = pa.nulls(len(rows.lines))
        else:
            columns[name] = pc.cast(raw_columns[name], ARROW_TYPES[column_type])
    rejected.sort(key=lambda row: row.line)
    return ConvertedChunk(columns, np.asarray(rows.lines, np.int64), rejected)


def convert_file(
    path: str,
    dialect: csv_dialect.CsvDialect,
    column_types: Mapping[str, ColumnType],
    chunk_bytes: int = 16 << 20,
    label_column: str = '',
) -> list[ConvertedChunk]:
    """Converts one local file chunk by chunk, in one process (for tests and tools)."""
    return list(iter_convert_file(path, dialect, column_types, chunk_bytes, label_column))


def iter_convert_file(
    path: str,
    dialect: csv_dialect.CsvDialect,
    column_types: Mapping[str, ColumnType],
    chunk_bytes: int = 16 << 20,
    label_column: str = '',
) -> Iterator[ConvertedChunk]:
    """`convert_file`'s chunks as they are converted, the file read once (compressed or not)."""
    _, data_start, first_line = csv_records.locate_data(path, compression.open_local, dialect)
    with compression.open_local(path) as f:
        for chunk, data in csv_records.iter_chunks(
            f, path, dialect.quote_byte, data_start, first_line, chunk_bytes, keep_data=True
        ):
            yield convert_chunk(data, chunk.first_line, dialect, column_types, label_column)
