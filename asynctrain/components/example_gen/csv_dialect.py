"""The CSV dialect ExampleGen reads: delimiter, quoting, header, null markers.

One frozen dataclass validated once at the edge (component constructor or CLI), plus the
header parsing that both the chunk planner and the tests use. No TFX or Beam imports.
"""

import csv
import dataclasses
from collections.abc import Sequence

UTF8_BOM = b'\xef\xbb\xbf'


@dataclasses.dataclass(frozen=True)
class CsvDialect:
    """How to split CSV bytes into rows and cells.

    Attributes:
      delimiter: One ASCII character between cells, e.g. ',' or '\\t' or '|'.
      quote_char: One ASCII character that quotes a cell (a doubled quote inside a quoted cell is
        a literal quote), or None when cells are never quoted. A quoted cell may hold the delimiter
        and newlines.
      column_names: Names of the columns in file order when the files have no header row; empty
        when the first row of every file is a header (the default, as stock CsvExampleGen).
      null_markers: Cell texts that mean "missing" besides the empty cell, e.g. ('NA',). A missing
        cell becomes a feature with an empty value list, as stock CsvExampleGen writes it.
    """

    delimiter: str = ','
    quote_char: str | None = '"'
    column_names: tuple[str, ...] = ()
    null_markers: tuple[str, ...] = ()

    def __post_init__(self):
        _check_single_ascii('delimiter', self.delimiter)
        if self.quote_char is not None:
            _check_single_ascii('quote_char', self.quote_char)
            if self.quote_char == self.delimiter:
                raise ValueError(f'quote_char {self.quote_char!r} must differ from delimiter.')
        if self.delimiter in ('\n', '\r'):
            raise ValueError('delimiter must not be a line break.')
        object.__setattr__(self, 'column_names', tuple(self.column_names))
        object.__setattr__(self, 'null_markers', tuple(self.null_markers))
        if len(set(self.column_names)) != len(self.column_names):
            raise ValueError(f'column_names has duplicates: {list(self.column_names)}')
        if any(not name for name in self.column_names):
            raise ValueError('column_names must not hold an empty name.')

    @property
    def has_header(self) -> bool:
        return not self.column_names

    @property
    def delimiter_byte(self) -> int:
        return ord(self.delimiter)

    @property
    def quote_byte(self) -> int | None:
        return None if self.quote_char is None else ord(self.quote_char)


def _check_single_ascii(field: str, value: str) -> None:
    if not isinstance(value, str) or len(value) != 1 or ord(value) > 127:
        raise ValueError(f'{field} must be one ASCII character, got {value!r}.')


def parse_header(line: bytes, dialect: CsvDialect) -> tuple[str, ...]:
    """Returns the column names in a header line (BOM, quotes and CRLF handled).

    Raises:
      ValueError: the header is not UTF-8, is empty, or names a column twice.
    """
    if line.startswith(UTF8_BOM):
        line = line[len(UTF8_BOM) :]
    try:
        text = line.decode('utf-8').rstrip('\r\n')
    except UnicodeDecodeError as e:
        raise ValueError(f'header is not valid UTF-8: {e}') from e
    if not text.strip():
        raise ValueError('header row is empty')
    reader = csv.reader(
        [text],
        delimiter=dialect.delimiter,
        quotechar=dialect.quote_char or '\0',
        quoting=csv.QUOTE_MINIMAL if dialect.quote_char else csv.QUOTE_NONE,
    )
    names = tuple(next(reader))
    if len(set(names)) != len(names):
        raise ValueError(f'header names a column twice: {list(names)}')
    return names


def check_same_header(names_by_file: Sequence[tuple[str, tuple[str, ...]]]) -> None:
    """Raises ValueError naming the first file whose header differs from the first file's."""
    if not names_by_file:
        return
    first_path, first = names_by_file[0]
    for path, names in names_by_file[1:]:
        if names != first:
            raise ValueError(
                f'{path} has header {list(names)}, but {first_path} has {list(first)}; '
                'files of one split must share a header.'
            )
