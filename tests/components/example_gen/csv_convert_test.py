"""Value-level tests of CSV parsing on one-quirk fixtures (see tests/data/csv/README.md)."""

import os

import pytest

from asynctrain.components.example_gen import csv_convert, csv_dialect, csv_records
from asynctrain.components.shared.feature_types import ColumnType

FIXTURES = os.path.join(os.path.dirname(__file__), '..', '..', 'data', 'csv')
TYPES = {'id': ColumnType.INT, 'price': ColumnType.FLOAT, 'name': ColumnType.BYTES}


DEFAULT_DIALECT = csv_dialect.CsvDialect()


def convert(name, dialect=DEFAULT_DIALECT, chunk_bytes=16 << 20, label_column=''):
    """Returns (rows as dicts with their line, rejected rows) of a fixture."""
    chunks = csv_convert.convert_file(
        os.path.join(FIXTURES, name), dialect, TYPES, chunk_bytes, label_column
    )
    rows, rejected = [], []
    for chunk in chunks:
        columns = {name: array.to_pylist() for name, array in chunk.columns.items()}
        for i, line in enumerate(chunk.lines.tolist()):
            rows.append(dict({name: values[i] for name, values in columns.items()}, line=line))
        rejected.extend(chunk.rejected)
    return rows, rejected


def test_quoted_cells_keep_delimiters_newlines_and_quotes():
    rows, rejected = convert('quoted_delimiters_newlines.csv')
    assert rejected == []
    assert [r['name'] for r in rows] == ['Smith, John', 'line one\nline two', 'say "hi"']
    assert [r['line'] for r in rows] == [2, 3, 5]
    assert [r['price'] for r in rows] == [2.5, 3.0, 4.25]


@pytest.mark.parametrize('chunk_bytes', [1, 7, 30])
def test_chunk_cuts_never_split_a_quoted_newline(chunk_bytes):
    assert convert('quoted_delimiters_newlines.csv', chunk_bytes=chunk_bytes) == convert(
        'quoted_delimiters_newlines.csv'
    )


def test_plan_chunks_covers_the_data_exactly():
    path = os.path.join(FIXTURES, 'quoted_delimiters_newlines.csv')
    chunks = csv_records.plan_chunks(path, lambda p: open(p, 'rb'), ord('"'), 14, 2, 1)
    assert [(c.start, c.end, c.first_line) for c in chunks] == [
        (14, 34, 2),
        (34, 60, 3),
        (60, 80, 5),
    ]


def test_crlf_leaves_no_carriage_return():
    rows, rejected = convert('crlf.csv')
    assert rejected == []
    assert rows == [
        {'id': 1, 'price': 2.5, 'name': 'alpha', 'line': 2},
        {'id': 2, 'price': 3.5, 'name': 'beta', 'line': 3},
    ]


def test_bom_is_not_part_of_the_first_column_name():
    path = os.path.join(FIXTURES, 'bom.csv')
    names, _, first_line = csv_records.locate_data(
        path, lambda p: open(p, 'rb'), csv_dialect.CsvDialect()
    )
    assert names == ('id', 'price', 'name')
    assert first_line == 2
    rows, _ = convert('bom.csv')
    assert [r['id'] for r in rows] == [1, 2]


def test_empty_cells_are_missing():
    rows, rejected = convert('empty_cells.csv')
    assert rejected == []
    assert rows == [
        {'id': 1, 'price': None, 'name': 'alpha', 'line': 2},
        {'id': None, 'price': 3.5, 'name': None, 'line': 3},
        {'id': 3, 'price': 4.5, 'name': None, 'line': 4},
    ]


def test_null_marker_is_missing_only_when_configured():
    rows, rejected = convert('null_marker_na.csv', csv_dialect.CsvDialect(null_markers=('NA',)))
    assert rejected == []
    assert [(r['id'], r['price'], r['name']) for r in rows] == [
        (1, None, 'alpha'),
        (None, 3.5, None),
        (3, 4.5, 'gamma'),
    ]
    rows, rejected = convert('null_marker_na.csv')
    assert [r['line'] for r in rows] == [4]
    assert [(r.line, r.reason) for r in rejected] == [
        (2, "column 'price': 'NA' is not FLOAT"),
        (3, "column 'id': 'NA' is not INT"),
    ]


def test_wrong_column_count_is_rejected_with_line_and_raw_text():
    rows, rejected = convert('wrong_column_count.csv')
    assert [r['id'] for r in rows] == [1, 4]
    assert rejected == [
        csv_convert.RejectedRow(3, 'wrong column count: 2 of 3', b'2,3.5'),
        csv_convert.RejectedRow(4, 'wrong column count: 4 of 3', b'3,4.5,gamma,extra'),
    ]


def test_unbalanced_quote_rejects_one_line_and_resumes():
    rows, rejected = convert('unbalanced_quote.csv')
    assert [(r['id'], r['line']) for r in rows] == [(1, 2), (3, 4), (4, 5)]
    assert [(r.line, r.raw) for r in rejected] == [(3, b'2,3.5,"beta')]
    assert rejected[0].reason.startswith('unbalanced quote')


def test_type_mismatch_names_the_column():
    rows, rejected = convert('type_mismatch.csv')
    assert [r['id'] for r in rows] == [1, 4]
    assert [(r.line, r.reason, r.raw) for r in rejected] == [
        (3, "column 'id': 'two' is not INT", b'two,3.5,beta'),
        (4, "column 'price': 'cheap' is not FLOAT", b'3,cheap,gamma'),
    ]


def test_invalid_utf8_in_text_is_rejected_with_exact_bytes():
    rows, rejected = convert('invalid_utf8.csv')
    assert [r['name'] for r in rows] == ['alpha', 'gamma']
    assert [(r.line, r.reason, r.raw) for r in rejected] == [
        (3, "column 'name': not valid UTF-8", b'2,3.5,b\xffeta')
    ]


def test_given_column_names_and_pipe_delimiter():
    dialect = csv_dialect.CsvDialect(delimiter='|', column_names=('id', 'price', 'name'))
    rows, rejected = convert('no_header_pipe.psv', dialect)
    assert rejected == []
    assert rows == [
        {'id': 1, 'price': 2.5, 'name': 'alpha', 'line': 1},
        {'id': 2, 'price': 3.5, 'name': 'beta', 'line': 2},
    ]


def test_tab_delimiter_without_quoting_keeps_quote_characters():
    dialect = csv_dialect.CsvDialect(delimiter='\t', quote_char=None)
    rows, rejected = convert('tab_no_quoting.tsv', dialect, chunk_bytes=5)
    assert rejected == []
    assert [(r['id'], r['name'], r['line']) for r in rows] == [
        (1, 'say "hi', 2),
        (2, '5" screen', 3),
    ]


@pytest.mark.parametrize(
    'kwargs, field',
    [
        ({'delimiter': ',,'}, 'delimiter'),
        ({'quote_char': ','}, 'quote_char'),
        ({'column_names': ('a', 'a')}, 'column_names'),
    ],
)
def test_dialect_validation_names_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        csv_dialect.CsvDialect(**kwargs)


@pytest.mark.parametrize('chunk_bytes', [1, 16 << 20])
def test_a_row_without_a_valid_label_is_rejected_with_its_reason(chunk_bytes):
    dialect = csv_dialect.CsvDialect(null_markers=('NA',))
    rows, rejected = convert('missing_label.csv', dialect, chunk_bytes, label_column='price')
    assert [(r.line, r.reason, r.raw) for r in rejected] == [
        (3, "label 'price' is missing", b'2,,beta'),
        (4, "label 'price' is missing", b'3,NA,gamma'),
        (5, "label 'price': 'cheap' is not FLOAT", b'4,cheap,delta'),
    ]
    # A missing feature (id on line 7) is not a missing label: the row is kept.
    assert rows == [
        {'id': 1, 'price': 2.5, 'name': 'alpha', 'line': 2},
        {'id': 5, 'price': 6.5, 'name': 'epsilon', 'line': 6},
        {'id': None, 'price': 7.5, 'name': 'zeta', 'line': 7},
    ]


def test_without_a_label_column_a_missing_cell_is_only_a_missing_feature():
    rows, rejected = convert('missing_label.csv', csv_dialect.CsvDialect(null_markers=('NA',)))
    assert [(r.line, r.reason) for r in rejected] == [(5, "column 'price': 'cheap' is not FLOAT")]
    assert [r['price'] for r in rows] == [2.5, None, None, 6.5, 7.5]


def test_several_null_markers_are_each_missing_and_every_row_is_accounted_for():
    # The markers `asynctrain init` proposes, several at once (as R, pandas and JSON exports write
    # a missing cell); a quoted marker is missing too, as stock CsvExampleGen reads it.
    data = b'1,NA,alpha\nnull,3.5,None\n3,N/A,"NA"\n4,NaN,delta\n'
    markers = csv_dialect.CsvDialect(null_markers=('NA', 'N/A', 'NaN', 'null', 'None'))
    chunk = csv_convert.convert_chunk(data, 2, markers, TYPES)
    assert chunk.rejected == []
    assert chunk.lines.tolist() == [2, 3, 4, 5]
    assert {name: array.to_pylist() for name, array in chunk.columns.items()} == {
        'id': [1, None, 3, 4],
        'price': [None, 3.5, None, None],
        'name': ['alpha', None, None, 'delta'],
    }
    # Without them, each row a marker breaks is rejected naming its cell: 4 rows read, 4 counted.
    plain = csv_convert.convert_chunk(data, 2, DEFAULT_DIALECT, TYPES)
    assert plain.lines.tolist() == [5]
    assert [(r.line, r.reason) for r in plain.rejected] == [
        (2, "column 'price': 'NA' is not FLOAT"),
        (3, "column 'id': 'null' is not INT"),
        (4, "column 'price': 'N/A' is not FLOAT"),
    ]
