"""The standalone command's layout and exit codes; a tiny benchmark run's JSON."""

import argparse
import json
import os
import shutil

import pytest

from asynctrain.benchmarks import examplegen as bench
from asynctrain.components.example_gen import cli

FIXTURES = os.path.join(os.path.dirname(__file__), '..', '..', 'data', 'csv')


def parse(parser_module, argv):
    parser = argparse.ArgumentParser()
    parser_module.add_arguments(parser)
    return parser.parse_args(argv)


def copy_fixtures(directory, *names):
    directory.mkdir()
    for name in names:
        shutil.copy(os.path.join(FIXTURES, name), directory / name)
    return str(directory)


def test_cli_writes_layout_and_prints_summary(tmp_path, capsys):
    input_dir = copy_fixtures(
        tmp_path / 'in', 'null_marker_na.csv', 'quoted_delimiters_newlines.csv'
    )
    out = tmp_path / 'out'
    args = parse(
        cli,
        [
            '--input',
            input_dir,
            '--output',
            str(out),
            '--schema',
            os.path.join(FIXTURES, 'schema.pbtxt'),
            '--null-marker',
            'NA',
            '--',
            '--runner=DirectRunner',
        ],
    )
    assert cli.run(args) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary['rows_read'] == 6 and summary['rows_rejected'] == 0
    assert sum(summary['rows_written_per_split'].values()) == summary['rows_written'] == 6
    assert summary['status'] == 'ok'
    assert sorted(os.listdir(out)) == [
        'Split-eval',
        'Split-train',
        'dead_letter',
        'examplegen_summary.json',
    ]


def test_cli_fails_above_max_bad_fraction_and_removes_splits(tmp_path, capsys):
    input_dir = copy_fixtures(tmp_path / 'in', 'invalid_utf8.csv')
    out = tmp_path / 'out'
    args = parse(
        cli,
        [
            '--input',
            input_dir,
            '--output',
            str(out),
            '--schema',
            os.path.join(FIXTURES, 'schema.pbtxt'),
            '--max-bad-fraction',
            '0.2',
        ],
    )
    assert cli.run(args) == 2
    captured = capsys.readouterr()
    assert "invalid_utf8.csv:3: column 'name': not valid UTF-8" in captured.err
    assert sorted(os.listdir(out)) == ['dead_letter', 'examplegen_summary.json']


def test_cli_label_column_rejects_rows_without_a_label(tmp_path, capsys):
    input_dir = copy_fixtures(tmp_path / 'in', 'missing_label.csv')
    argv = ['--input', input_dir, '--output', str(tmp_path / 'out'), '--null-marker', 'NA']
    argv += ['--schema', os.path.join(FIXTURES, 'schema.pbtxt'), '--label-column', 'price']
    assert cli.run(parse(cli, argv)) == 2  # 3 of 6 rejected, above the default 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out.strip().splitlines()[-1])
    assert (summary['rows_read'], summary['rows_rejected']) == (6, 3)
    assert "missing_label.csv:3: label 'price' is missing" in captured.err
    assert "missing_label.csv:5: label 'price': 'cheap' is not FLOAT" in captured.err


def test_cli_missing_input_is_an_error(tmp_path, capsys):
    args = parse(cli, ['--input', str(tmp_path / 'nowhere'), '--output', str(tmp_path / 'o')])
    assert cli.run(args) == 1
    assert 'does not exist' in capsys.readouterr().err


@pytest.mark.integration
def test_tiny_benchmark_json_is_well_formed(tmp_path, capsys):
    args = parse(
        bench, ['--rows', '300', '--output', str(tmp_path), '--in-process', '--infer-types']
    )
    assert bench.run(args) == 0
    with open(tmp_path / 'examplegen.json') as f:
        results = json.load(f)
    assert results['rows'] == 300
    assert results['outputs_agree'] is True
    assert sum(results['rows_per_split'].values()) == 300
    for variant in ('stock', 'ours', 'raw'):
        measured = results['variants'][variant]
        assert measured['seconds'] > 0 and measured['rows_per_second'] > 0
        assert measured['peak_rss_mb'] > 0
    assert results['ours_vs_stock'] > 0 and results['ours_vs_raw'] > 0
    assert (tmp_path / 'examplegen.png').stat().st_size > 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == results
