"""Bad input through the CSV ExampleGen: each file of `tests/data/bad_csv/` gives exactly its good
rows (by value), exactly its bad rows in the dead letter (line and reason), or a clear error that
names the file; never a silently smaller output.

Most cases run the Beam transform directly (fast); one goes through the executor's `Do` with
hand-built artifacts, and one through the standalone command `asynctrain examplegen`.
"""

import base64
import json
import os

import pytest

from asynctrain.components.example_gen import csv_source

pytestmark = pytest.mark.integration

LONG_NAME = b'abcdefg,\n' * 500
UNBALANCED = (
    'unbalanced quote: a quoted cell opened on this line never closes within a row of '
    'the right column count'
)

# file -> (rows written as (id, price, name), rows rejected as (line, reason))
CONVERTED = {
    'wrong_column_count.csv': (
        [((1,), (1.5,), (b'ant',)), ((5,), (5.5,), (b'eel',))],
        [
            (3, 'wrong column count: 2 of 3'),
            (4, 'wrong column count: 4 of 3'),
            (5, 'wrong column count: 1 of 3'),
        ],
    ),
    'unbalanced_quote.csv': (
        [((1,), (1.5,), (b'ant',)), ((3,), (3.5,), (b'cat',)), ((4,), (4.5,), (b'dog',))],
        [(3, UNBALANCED)],
    ),
    'type_mismatch.csv': (
        [((1,), (1.5,), (b'ant',)), ((4,), (4.5,), (b'dog',))],
        [
            (3, "column 'id': 'x2' is not INT"),
            (4, "column 'price': '3.5.5' is not FLOAT"),
            (6, "column 'id': '5.0' is not INT"),
        ],
    ),
    'invalid_utf8.csv': (
        [((1,), (1.5,), (b'ant',)), ((4,), (4.5,), ('dög'.encode(),))],
        [(3, "column 'name': not valid UTF-8"), (4, "column 'name': not valid UTF-8")],
    ),
    'bom.csv': ([((1,), (1.5,), (b'ant',)), ((2,), (2.5,), (b'bee',))], []),
    'crlf.csv': (
        [((1,), (1.5,), (b'ant',)), ((2,), (2.5,), (b'b\r\nee',)), ((3,), (3.5,), (b'cat',))],
        [],
    ),
    'long_field.csv': (
        [((1,), (1.5,), (b'ant',)), ((2,), (2.5,), (LONG_NAME,)), ((3,), (3.5,), (b'cat',))],
        [],
    ),
}


@pytest.mark.parametrize('chunk_bytes', [64, 8 << 20], ids=['64B-chunks', '8MB-chunks'])
@pytest.mark.parametrize('name', sorted(CONVERTED))
def test_corpus_file_gives_exact_rows_and_rejections(
    name, chunk_bytes, corpus_input, convert, read_examples, read_rejected
):
    """Bad CSV file: exact rows written, exact rows rejected with line and reason"""
    want_rows, want_rejected = CONVERTED[name]
    out, summary = convert(corpus_input(name), chunk_bytes=chunk_bytes)

    assert read_examples(out) == sorted(want_rows)
    rejected = read_rejected(os.path.join(out, 'dead_letter'))
    assert [(r['line'], r['reason']) for r in rejected] == want_rejected
    assert all(r['file'].endswith('/' + name) for r in rejected)
    assert (summary['rows_read'], summary['rows_written'], summary['rows_rejected']) == (
        len(want_rows) + len(want_rejected),
        len(want_rows),
        len(want_rejected),
    )


def test_dead_letter_keeps_the_exact_raw_bytes(corpus_input, convert, read_rejected):
    """Invalid UTF-8: the dead letter keeps each rejected row's exact bytes"""
    out, _ = convert(corpus_input('invalid_utf8.csv', 'wrong_column_count.csv'))
    raw = {
        (os.path.basename(r['file']), r['line']): base64.b64decode(r['raw_base64'])
        for r in read_rejected(os.path.join(out, 'dead_letter'))
    }
    assert raw[('invalid_utf8.csv', 3)] == b'2,2.5,b\xffe'
    assert raw[('invalid_utf8.csv', 4)] == b'3,3.5,c\xc3(t'
    assert raw[('wrong_column_count.csv', 4)] == b'3,3.5,cat,extra'


def test_crlf_leaves_no_carriage_return_outside_quotes(corpus_input, convert, read_examples):
    """CRLF line endings: no stray carriage return in any unquoted cell"""
    out, _ = convert(corpus_input('crlf.csv'))
    names = [name for _, _, (name,) in read_examples(out)]
    assert names == [b'ant', b'b\r\nee', b'cat']  # only the quoted cell keeps its CRLF


@pytest.mark.parametrize(
    'name,message',
    [
        ('empty.csv', 'input is empty: no data rows in '),
        ('header_only.csv', 'input is empty: no data rows in '),
        ('mixed_header', 'has header'),
    ],
    ids=['empty.csv', 'header_only.csv', 'mixed_header'],
)
def test_unusable_input_fails_naming_the_file(name, message, corpus_input, tmp_path):
    """Empty file, header-only file, headers that differ within a split: clear error naming the file"""
    input_dir = corpus_input(name)
    config = csv_source.CsvSourceConfig(
        input_splits=(('all', os.path.join(input_dir, '*')),),
        output_splits=(),
        examples_dir=str(tmp_path / 'out'),
        dead_letter_dir=str(tmp_path / 'out' / 'dead_letter'),
        summary_path=str(tmp_path / 'out' / 'summary.json'),
    )
    with pytest.raises(ValueError) as error:
        csv_source.CsvToExampleFiles(config)
    assert message in str(error.value)
    named = [f for f in os.listdir(input_dir) if f in str(error.value)]
    assert named, f'error names no input file: {error.value}'
    assert not (tmp_path / 'out').exists()  # it failed before writing anything


def test_mixed_header_error_names_both_files_and_headers(corpus_input, tmp_path):
    """Header that differs between files of one split: both files and both headers named"""
    input_dir = corpus_input('mixed_header')
    config = csv_source.CsvSourceConfig(
        input_splits=(('all', os.path.join(input_dir, '*')),),
        output_splits=(),
        examples_dir=str(tmp_path / 'out'),
        dead_letter_dir=str(tmp_path / 'dl'),
        summary_path=str(tmp_path / 'summary.json'),
    )
    with pytest.raises(ValueError) as error:
        csv_source.CsvToExampleFiles(config)
    text = str(error.value)
    assert 'part-0.csv' in text and 'part-1.csv' in text
    assert "['id', 'name', 'price']" in text and "['id', 'price', 'name']" in text


@pytest.mark.parametrize('stage', ['after_planning_the_files', 'while_converting_chunks'])
def test_file_that_vanishes_mid_run_fails_naming_it(stage, corpus_input, tmp_path, monkeypatch):
    """A file that vanishes mid-run: the run fails naming the file, with no summary written"""
    import apache_beam as beam

    from asynctrain.components.shared import feature_types

    input_dir = corpus_input('long_field.csv', 'wrong_column_count.csv')
    victim = os.path.join(input_dir, 'long_field.csv')
    out = tmp_path / 'out'
    schema = os.path.join(os.path.dirname(__file__), '..', 'data', 'bad_csv', 'schema.pbtxt')
    config = csv_source.CsvSourceConfig(
        input_splits=(('all', os.path.join(input_dir, '*')),),
        output_splits=(),
        examples_dir=str(out),
        dead_letter_dir=str(out / 'dead_letter'),
        summary_path=str(out / 'summary.json'),
        column_types=feature_types.column_types_from_schema(feature_types.load_schema(schema)),
        chunk_bytes=256,
    )
    transform = csv_source.CsvToExampleFiles(config)  # globs the files and reads their headers
    if stage == 'after_planning_the_files':
        os.remove(victim)
    else:
        read_chunk = csv_source._read_chunk  # pylint: disable=protected-access

        def read_then_delete(chunk):
            # The first chunks of the file convert; the file is gone for the later ones.
            if chunk.path == victim and chunk.index > 0 and os.path.exists(victim):
                os.remove(victim)
            return read_chunk(chunk)

        monkeypatch.setattr(csv_source, '_read_chunk', read_then_delete)

    with pytest.raises(Exception) as error:  # Beam wraps the cause in its runner's error type.
        with beam.Pipeline() as pipeline:
            _ = pipeline | 'CsvToExampleFiles' >> transform
    assert 'FileNotFoundError' in str(error.value) or isinstance(error.value, FileNotFoundError)
    assert victim in str(error.value)
    assert not (out / 'summary.json').exists()


def test_file_that_shrinks_mid_run_fails_naming_it_instead_of_losing_rows(
    corpus_input, tmp_path, monkeypatch
):
    """A file truncated between chunk planning and reading: the run fails naming it, no lost row"""
    import apache_beam as beam

    input_dir = corpus_input('long_field.csv', 'wrong_column_count.csv')
    victim = os.path.join(input_dir, 'wrong_column_count.csv')
    out = tmp_path / 'out'
    config = csv_source.CsvSourceConfig(
        input_splits=(('all', os.path.join(input_dir, '*')),),
        output_splits=(),
        examples_dir=str(out),
        dead_letter_dir=str(out / 'dead_letter'),
        summary_path=str(out / 'summary.json'),
    )
    transform = csv_source.CsvToExampleFiles(config)
    read_chunk = csv_source._read_chunk  # pylint: disable=protected-access

    def truncate_then_read(chunk):
        # The chunk was planned over the whole file; its last line is cut off before it is read.
        if chunk.path == victim and not truncated:
            with open(victim, 'rb') as f:
                data = f.read()
            last_line = data.rstrip(b'\n').rsplit(b'\n', 1)[1]
            with open(victim, 'wb') as f:
                f.write(data[: len(data) - len(last_line) - 1])
            truncated.append(victim)
        return read_chunk(chunk)

    truncated = []
    monkeypatch.setattr(csv_source, '_read_chunk', truncate_then_read)

    with pytest.raises(Exception) as error:  # Beam wraps the cause in its runner's error type.
        with beam.Pipeline() as pipeline:
            _ = pipeline | 'CsvToExampleFiles' >> transform
    assert victim in str(error.value)
    assert 'the file changed while it was being converted' in str(error.value)
    assert not (out / 'summary.json').exists()


def test_executor_counts_every_row_of_the_corpus(
    corpus_input, tmp_path, read_examples, read_rejected
):
    """All converting corpus files through the executor's Do: artifact counts match the files"""
    from tfx.types import standard_artifacts
    from tfx.utils import proto_utils

    from asynctrain.components.example_gen import component, executor, spec

    input_dir = corpus_input(*CONVERTED)
    schema = os.path.join(os.path.dirname(__file__), '..', 'data', 'bad_csv', 'schema.pbtxt')
    props = dict(
        component.CsvExampleGen(
            input_base=input_dir, schema_path=schema, max_bad_fraction=0.5
        ).exec_properties
    )
    props = {
        k: proto_utils.proto_to_json(v) if hasattr(v, 'DESCRIPTOR') else v for k, v in props.items()
    }
    examples = standard_artifacts.Examples()
    examples.uri = str(tmp_path / 'examples')
    executor.Executor().Do({}, {spec.EXAMPLES_KEY: [examples]}, props)

    want_rows = sorted(row for rows, _ in CONVERTED.values() for row in rows)
    want_rejected = sorted(
        (name, line, reason)
        for name, (_, rejected) in CONVERTED.items()
        for line, reason in rejected
    )
    assert read_examples(examples.uri) == want_rows
    got_rejected = [
        (os.path.basename(r['file']), r['line'], r['reason'])
        for r in read_rejected(os.path.join(examples.uri, 'dead_letter'))
    ]
    assert sorted(got_rejected) == want_rejected
    custom = {
        k: v.int_value
        for k, v in examples.mlmd_artifact.custom_properties.items()
        if k.startswith('rows_')
    }
    assert custom['rows_read'] == len(want_rows) + len(want_rejected)
    assert custom['rows_written'] == len(want_rows)
    assert custom['rows_rejected'] == len(want_rejected)
    assert custom['rows_written_train'] + custom['rows_written_eval'] == len(want_rows)


def test_executor_rejects_too_many_bad_rows_naming_file_and_line(corpus_input, tmp_path):
    """Bad rows above max_bad_fraction: executor fails naming file:line: reason"""
    from tfx.types import standard_artifacts
    from tfx.utils import proto_utils

    from asynctrain.components.example_gen import component, executor, spec

    input_dir = corpus_input('type_mismatch.csv')
    schema = os.path.join(os.path.dirname(__file__), '..', 'data', 'bad_csv', 'schema.pbtxt')
    props = dict(component.CsvExampleGen(input_base=input_dir, schema_path=schema).exec_properties)
    props = {
        k: proto_utils.proto_to_json(v) if hasattr(v, 'DESCRIPTOR') else v for k, v in props.items()
    }
    examples = standard_artifacts.Examples()
    examples.uri = str(tmp_path / 'examples')
    with pytest.raises(RuntimeError) as error:
        executor.Executor().Do({}, {spec.EXAMPLES_KEY: [examples]}, props)
    assert "type_mismatch.csv:3: column 'id': 'x2' is not INT" in str(error.value)
    assert '3 of 5 rows rejected' in str(error.value)
    assert 'rows_read' not in examples.mlmd_artifact.custom_properties


def test_examplegen_command_on_the_corpus(
    corpus_input, tmp_path, read_examples, read_rejected, capsys
):
    """asynctrain examplegen on the corpus: JSON summary, rows and dead letter match the files"""
    from asynctrain import cli

    input_dir = corpus_input(*CONVERTED)
    out = tmp_path / 'cli_out'
    schema = os.path.join(os.path.dirname(__file__), '..', 'data', 'bad_csv', 'schema.pbtxt')
    status = cli.main(
        [
            'examplegen',
            '--input',
            input_dir,
            '--output',
            str(out),
            '--schema',
            schema,
            '--max-bad-fraction',
            '0.5',
            '--chunk-mb',
            '0.0001',
        ]
    )
    assert status == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    want_rows = sorted(row for rows, _ in CONVERTED.values() for row in rows)
    n_rejected = sum(len(rejected) for _, rejected in CONVERTED.values())
    assert summary['status'] == 'ok'
    assert (summary['rows_read'], summary['rows_written'], summary['rows_rejected']) == (
        len(want_rows) + n_rejected,
        len(want_rows),
        n_rejected,
    )
    assert read_examples(str(out)) == want_rows
    assert len(read_rejected(str(out / 'dead_letter'))) == n_rejected


def test_examplegen_command_fails_on_empty_input(corpus_input, tmp_path, capsys):
    """asynctrain examplegen on an empty file: exit status 1 and an error naming the file"""
    from asynctrain import cli

    input_dir = corpus_input('empty.csv')
    status = cli.main(['examplegen', '--input', input_dir, '--output', str(tmp_path / 'o')])
    assert status == 1
    err = capsys.readouterr().err
    assert 'input is empty' in err and 'empty.csv' in err


def test_executor_on_a_missing_input_dir_fails_naming_it(tmp_path):
    """Input directory that does not exist: executor fails naming it, nothing written"""
    from tfx.types import standard_artifacts
    from tfx.utils import proto_utils

    from asynctrain.components.example_gen import component, executor, spec

    missing = str(tmp_path / 'no_such_dir')
    props = dict(component.CsvExampleGen(input_base=missing).exec_properties)
    props = {
        k: proto_utils.proto_to_json(v) if hasattr(v, 'DESCRIPTOR') else v for k, v in props.items()
    }
    examples = standard_artifacts.Examples()
    examples.uri = str(tmp_path / 'examples')
    with pytest.raises(FileNotFoundError, match=f'input_base {missing} does not exist'):
        executor.Executor().Do({}, {spec.EXAMPLES_KEY: [examples]}, props)
    assert not (tmp_path / 'examples').exists()
