"""Property: every row is either converted intact or rejected with its line; none is lost."""

import csv
import io
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from asynctrain.components.example_gen import csv_convert, csv_dialect
from asynctrain.components.shared.feature_types import ColumnType

TYPES = {'id': ColumnType.INT, 'price': ColumnType.FLOAT, 'name': ColumnType.BYTES}
CORRUPTIONS = ('extra_cell', 'missing_cell', 'not_int', 'not_utf8', 'unclosed_quote')

clean_row = st.tuples(
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.text(alphabet='abc ,"\n', max_size=8),
)
row = st.one_of(
    st.tuples(st.just('clean'), clean_row), st.tuples(st.sampled_from(CORRUPTIONS), clean_row)
)


def corrupt(kind, values) -> bytes:
    number, price, _ = values
    return {
        'extra_cell': f'{number},{price!r},x,y',
        'missing_cell': f'{number},{price!r}',
        'not_int': f'n{number},{price!r},x',
        'not_utf8': f'{number},{price!r},x',
        'unclosed_quote': f'{number},{price!r},"open',
    }[kind].encode() + (b'\xff' if kind == 'not_utf8' else b'')


def write_csv(rows, crlf):
    """Returns (CSV bytes, [(line, kind, values)]) for the generated rows."""
    newline = '\r\n' if crlf else '\n'
    out = io.BytesIO()
    out.write(f'id,price,name{newline}'.encode())
    expected, line = [], 2
    for kind, values in rows:
        if kind == 'clean':
            text = io.StringIO()
            csv.writer(text, lineterminator=newline).writerow(
                [values[0], repr(values[1]), values[2]]
            )
            encoded = text.getvalue().encode()
        else:
            encoded = corrupt(kind, values) + newline.encode()
        expected.append((line, kind, values))
        out.write(encoded)
        line += encoded.count(b'\n')
    return out.getvalue(), expected


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(row, min_size=1, max_size=25), chunk_bytes=st.integers(1, 300), crlf=st.booleans()
)
def test_rows_read_equal_written_plus_rejected(tmp_path_factory, rows, chunk_bytes, crlf):
    # After an unclosed quote, a later line with an odd number of quotes (a second unclosed quote,
    # or one line of a quoted multi-line cell) would legally close it: the text between is then
    # one valid quoted cell, and no reader can tell. So keep one unclosed quote, and no multi-line
    # cells after it.
    seen_quote = False
    filtered = []
    for kind, values in rows:
        if kind == 'unclosed_quote':
            if seen_quote:
                continue
            seen_quote = True
        elif seen_quote:
            values = (values[0], values[1], values[2].replace('\n', ''))
        filtered.append((kind, values))
    data, expected = write_csv(filtered, crlf)
    path = os.path.join(tmp_path_factory.mktemp('csv'), 'rows.csv')
    with open(path, 'wb') as f:
        f.write(data)

    chunks = csv_convert.convert_file(path, csv_dialect.CsvDialect(), TYPES, chunk_bytes)
    written = []
    for chunk in chunks:
        ids, prices, names = (chunk.columns[n].to_pylist() for n in ('id', 'price', 'name'))
        written += list(zip(chunk.lines.tolist(), ids, prices, names))
    rejected = [r for chunk in chunks for r in chunk.rejected]

    assert len(written) + len(rejected) == len(expected)
    want_written = [
        (line, v[0], v[1], v[2] or None) for line, kind, v in expected if kind == 'clean'
    ]
    assert sorted(written) == sorted(want_written)
    assert sorted(r.line for r in rejected) == [
        line for line, kind, _ in expected if kind != 'clean'
    ]
