"""Finds CSV row boundaries in bytes, vectorized, so one file can be parsed in parallel chunks.

A row ends at a newline outside quotes. Outside-ness is the parity of the quote characters seen
so far (a doubled quote inside a quoted cell adds two), so numpy can find every row end and
every cell delimiter of a block without a Python loop per byte or per row.

`plan_chunks` streams a file once and cuts it into byte ranges of about `target_bytes` that
start and end on row boundaries, each with the physical line number of its first row, so every
rejected row can be reported as file:line. `split_records` splits one chunk into rows and counts
their cells. Neither imports TFX or Beam.
"""

import dataclasses
from collections.abc import Callable, Iterator
from typing import BinaryIO, NamedTuple

import numpy as np

from asynctrain.components.example_gen import csv_dialect

_NEWLINE = 10
_CR = 13
_SCAN_BLOCK_BYTES = 16 << 20
_MAX_HEADER_BYTES = 4 << 20


@dataclasses.dataclass(frozen=True)
class Chunk:
    """A byte range of one CSV file holding whole rows.

    Attributes:
      path: The file.
      index: Position of this chunk in the file, from 0.
      start: Offset of the first byte of the first row.
      end: Offset just past the last row (past its newline, or the end of the file).
      first_line: 1-based physical line number of the first row (the header is line 1).
    """

    path: str
    index: int
    start: int
    end: int
    first_line: int


class Records(NamedTuple):
    """Rows found in a chunk's bytes; arrays are aligned, one entry per row.

    Attributes:
      starts: Offset of each row's first byte.
      ends: Offset just past each row's last content byte (its newline and CR excluded).
      line_offsets: 0-based physical line of each row's start, relative to the chunk.
      num_lines: Physical lines each row spans (more than 1 when a quoted cell holds newlines).
      num_fields: Cells in each row, counting only delimiters outside quotes.
      unbalanced: True where a row ends at the end of the data with a quote still open.
    """

    starts: np.ndarray
    ends: np.ndarray
    line_offsets: np.ndarray
    num_lines: np.ndarray
    num_fields: np.ndarray
    unbalanced: np.ndarray


def _positions(buf: np.ndarray, byte: int | None) -> np.ndarray:
    if byte is None:
        return np.zeros(0, np.int64)
    return np.flatnonzero(buf == byte)


def split_records(data: bytes, dialect: csv_dialect.CsvDialect, offset: int = 0) -> Records:
    """Splits `data[offset:]` into rows, quote parity starting even at `offset`."""
    buf = np.frombuffer(data, np.uint8)
    newlines = _positions(buf, _NEWLINE)
    quotes = _positions(buf, dialect.quote_byte)
    delimiters = _positions(buf, dialect.delimiter_byte)
    return _split(buf, newlines, quotes, delimiters, offset)


def split_records_from(
    buf: np.ndarray, newlines: np.ndarray, quotes: np.ndarray, delimiters: np.ndarray, offset: int
) -> Records:
    """As `split_records`, reusing the byte positions of a previous call (for resyncing)."""
    return _split(buf, newlines, quotes, delimiters, offset)


def _split(
    buf: np.ndarray, newlines: np.ndarray, quotes: np.ndarray, delimiters: np.ndarray, offset: int
) -> Records:
    quotes_before_offset = np.searchsorted(quotes, offset)
    all_newlines = newlines
    newlines = newlines[np.searchsorted(newlines, offset) :]
    delimiters = delimiters[np.searchsorted(delimiters, offset) :]

    def outside_quotes(positions: np.ndarray) -> np.ndarray:
        return ((np.searchsorted(quotes, positions) - quotes_before_offset) & 1) == 0

    row_newlines = newlines[outside_quotes(newlines)]
    size = len(buf)
    last_end = row_newlines[-1] + 1 if len(row_newlines) else offset
    tail = last_end < size
    ends_with_newline = row_newlines
    if tail:
        ends_with_newline = np.append(row_newlines, size)
    starts = np.concatenate(([offset], ends_with_newline[:-1] + 1)).astype(np.int64)
    ends = ends_with_newline.astype(np.int64)
    if len(ends) == 0:
        starts = starts[:0]
    unbalanced = np.zeros(len(ends), bool)
    if tail and len(ends):
        tail_quotes = np.searchsorted(quotes, size) - np.searchsorted(quotes, starts[-1])
        unbalanced[-1] = bool(tail_quotes & 1)
    # Drop a trailing CR (CRLF files) from the content.
    content_ends = ends.copy()
    has_cr = np.zeros(len(ends), bool)
    nonempty = content_ends > starts
    has_cr[nonempty] = buf[content_ends[nonempty] - 1] == _CR
    content_ends -= has_cr
    outside_delimiters = delimiters[outside_quotes(delimiters)]
    num_fields = (
        np.searchsorted(outside_delimiters, ends) - np.searchsorted(outside_delimiters, starts) + 1
    )
    line_offsets = np.searchsorted(all_newlines, starts)
    num_lines = np.searchsorted(all_newlines, ends) - line_offsets + 1
    return Records(starts, content_ends, line_offsets, num_lines, num_fields, unbalanced)


def read_first_row(f: BinaryIO, quote_byte: int | None) -> bytes:
    """Reads the first row (quote-aware) from the start of `f`, newline included."""
    head = f.read(_MAX_HEADER_BYTES)
    buf = np.frombuffer(head, np.uint8)
    newlines = _positions(buf, _NEWLINE)
    quotes = _positions(buf, quote_byte)
    even = ((np.searchsorted(quotes, newlines)) & 1) == 0
    if not even.any():
        return head
    return head[: newlines[even][0] + 1]


def plan_chunks(
    path: str,
    open_fn: Callable[[str], BinaryIO],
    quote_byte: int | None,
    data_start: int,
    first_line: int,
    target_bytes: int,
) -> list[Chunk]:
    """Cuts the rows of `path` after `data_start` into chunks of about `target_bytes`.

    Streams the file once in blocks; memory does not grow with the file's size. A cut is made at
    the first row boundary at or after each target, so a quoted cell holding newlines is never
    split. An unbalanced quote keeps the parity odd until the next quote, so the chunk holding it
    grows; the chunk's parser then isolates the bad line (see `csv_convert`).
    """
    with open_fn(path) as f:
        return [
            chunk
            for chunk, _ in iter_chunks(f, path, quote_byte, data_start, first_line, target_bytes)
        ]


def iter_chunks(
    f: BinaryIO,
    path: str,
    quote_byte: int | None,
    data_start: int,
    first_line: int,
    target_bytes: int,
    keep_data: bool = False,
) -> Iterator[tuple[Chunk, bytes | None]]:
    """The chunks of `plan_chunks`, read from the open file `f` in one pass, each with its bytes
    when `keep_data` (a compressed file, which cannot be read again from an offset cheaply, is
    converted this way: memory holds one chunk and one scan block, whatever the file's size)."""
    chunk_index = 0
    chunk_start, chunk_line = data_start, first_line
    parity = 0
    block_start = data_start
    newlines_before_block = first_line - 1
    pending = bytearray()  # with keep_data: the bytes from chunk_start on
    f.seek(data_start)
    while True:
        block = f.read(_SCAN_BLOCK_BYTES)
        if not block:
            break
        if keep_data:
            pending += block
        buf = np.frombuffer(block, np.uint8)
        newlines = _positions(buf, _NEWLINE)
        quotes = _positions(buf, quote_byte)
        if len(quotes):
            even = ((np.searchsorted(quotes, newlines) + parity) & 1) == 0
            parity = (parity + len(quotes)) & 1
        else:
            even = np.ones(len(newlines), bool)
        cut_index = np.flatnonzero(even)
        cuts = block_start + newlines[cut_index] + 1
        cut_lines = newlines_before_block + cut_index + 2
        while len(cuts):
            i = np.searchsorted(cuts, chunk_start + target_bytes)
            if i >= len(cuts):
                break
            cut, line = int(cuts[i]), int(cut_lines[i])
            data = None
            if keep_data:
                data = bytes(pending[: cut - chunk_start])
                del pending[: cut - chunk_start]
            yield Chunk(path, chunk_index, chunk_start, cut, chunk_line), data
            chunk_index += 1
            chunk_start, chunk_line = cut, line
        block_start += len(block)
        newlines_before_block += len(newlines)
    if block_start > chunk_start:
        yield (
            Chunk(path, chunk_index, chunk_start, block_start, chunk_line),
            bytes(pending) if keep_data else None,
        )


def locate_data(
    path: str, open_fn: Callable[[str], BinaryIO], dialect: csv_dialect.CsvDialect
) -> tuple[tuple[str, ...], int, int]:
    """Returns (column names, offset of the first data row, its line number) for one file."""
    with open_fn(path) as f:
        if dialect.has_header:
            header = read_first_row(f, dialect.quote_byte)
            if not header:
                return (), 0, 1
            names = csv_dialect.parse_header(header, dialect)
            return names, len(header), 2 + header.count(b'\n', 0, len(header) - 1)
        start = f.read(len(csv_dialect.UTF8_BOM))
        offset = len(csv_dialect.UTF8_BOM) if start == csv_dialect.UTF8_BOM else 0
        return dialect.column_names, offset, 1
