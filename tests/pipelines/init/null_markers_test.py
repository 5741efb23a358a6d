"""`asynctrain init` finds the usual missing-value markers without `--null-marker`, names the
columns that are numbers but for a few other texts, and never decides the label's task on
numbers written with a marker."""

from __future__ import annotations

import random

import pytest
import yaml

from asynctrain.components.example_gen import csv_dialect, csv_sample
from asynctrain.components.shared.feature_types import ColumnType
from asynctrain.pipelines.init import init_command, null_markers, pipeline_draft
from tests.pipelines.init.init_args import init_args


def _write(path, header, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [','.join(header)] + [','.join(str(v) for v in row) for row in rows]
    path.write_text('\n'.join(lines) + '\n')


def _text(tmp_path, header, rows, given=()):
    _write(tmp_path / 'data' / 'part.csv', header, rows)
    files = csv_sample.input_files(str(tmp_path / 'data'))
    return csv_sample.read_text(files, csv_dialect.CsvDialect(null_markers=given))


HEADER = ('price', 'rooms', 'built', 'area', 'code')


def _rows(n=120, seed=0):
    """`price` (the label, a float) and `rooms` (an int) with `NA` and `null`, `built` (dates)
    with `None`, `area` (a float) with `NaN`, `code` a text column where `NA` is a real value."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        rows.append(
            (
                'NA' if i % 10 == 3 else round(rng.uniform(50, 500), 1),
                'null' if i % 15 == 4 else ('NA' if i % 15 == 5 else rng.randrange(1, 8)),
                'None'
                if i % 20 == 7
                else f'20{rng.randrange(10, 24)}-0{rng.randrange(1, 10)}-1{i % 10}',
                'NaN' if i % 30 == 1 else round(rng.uniform(20, 200), 2),
                rng.choice(['NA', 'EU', 'AS']),
            )
        )
    return rows


def test_markers_in_columns_of_numbers_or_dates_are_found_with_their_counts(tmp_path):
    text = _text(tmp_path, HEADER, _rows())
    plan = null_markers.plan_markers(text)
    assert plan.markers == ('NA', 'NaN', 'null', 'None')
    assert plan.counts == {
        'NA': (('price', 12), ('rooms', 8)),
        'NaN': (('area', 4),),
        'null': (('rooms', 8),),
        'None': (('built', 6),),
    }
    # `code` holds NA as a value: it is read as missing there too, and the reason says so.
    (code_count,) = [n for name, n in plan.elsewhere['NA'] if name == 'code']
    assert code_count == sum(row[4] == 'NA' for row in _rows())
    assert "'NA' is also read as missing in the text column(s) code" in plan.reason
    assert "'NA' 20 cells in price 12, rooms 8" in plan.reason
    assert plan.mixed == ()

    sample = csv_sample.typed(text, plan.markers)
    assert sample.types['price'] == ColumnType.FLOAT
    assert sample.types['rooms'] == ColumnType.INT
    assert sample.types['area'] == ColumnType.FLOAT
    assert sample.columns['area'].null_count == 4  # NaN is missing, not a number in the mean
    assert sample.columns['price'].null_count == 12
    # The same types and cells as reading with the markers given, as ExampleGen reads them.
    given = csv_sample.read_sample(
        csv_sample.input_files(str(tmp_path / 'data')),
        csv_dialect.CsvDialect(null_markers=plan.markers),
    )
    assert given.types == sample.types
    for name in HEADER:
        assert given.columns[name].equals(sample.columns[name]), name
    # The label's task is decided on the numbers: regression, not a class per price.
    task = pipeline_draft.plan_task(sample, 'price')
    assert (task.task, task.reason) == ('regression', 'a float label')
    dates = {plan.name: plan for plan in pipeline_draft.plan_columns(sample, 'price')}['built']
    assert dates.transform == 'datetime'


def test_markers_given_with_the_flag_win(tmp_path):
    text = _text(tmp_path, HEADER, _rows(), given=('null',))
    plan = null_markers.plan_markers(text, ('null',))
    assert (plan.markers, plan.given, plan.counts) == (('null',), True, {})
    assert plan.reason == 'as given with --null-marker'
    sample = csv_sample.typed(text, plan.markers)
    assert sample.types['price'] == ColumnType.BYTES  # 'NA' not a marker: the user said so


def test_a_column_of_numbers_but_for_a_few_texts_is_named_with_examples(tmp_path):
    rows = [(i * 1.5, '?' if i % 40 == 0 else ('-' if i == 7 else i % 9)) for i in range(120)]
    text = _text(tmp_path, ('y', 'score'), rows)
    plan = null_markers.plan_markers(text)
    assert plan.markers == ()
    (mixed,) = plan.mixed
    assert (mixed.name, mixed.cells, mixed.examples) == ('score', 4, (('?', 3), ('-', 1)))
    assert mixed.describe() == (
        "'score' is numbers but for 4 cells ('?' x3, '-' x1): read as text; if they mean "
        '"missing", pass --null-marker for each'
    )


def _args(tmp_path, label, **overrides):
    return init_args(tmp_path / 'data', label, tmp_path / 'spec', **overrides)


@pytest.mark.integration
def test_init_proposes_the_markers_it_found_and_says_why(tmp_path, capsys):
    _write(tmp_path / 'data' / 'part.csv', HEADER, _rows())
    assert init_command.run(_args(tmp_path, 'price')) == 0
    printed = capsys.readouterr().out
    assert "  missing values: 'NA', 'NaN', 'null', 'None' (found without --null-marker" in printed
    assert "label 'price': regression (a float label)" in printed
    config_text = (tmp_path / 'spec' / 'config.yaml').read_text()
    assert "  # found without --null-marker in columns otherwise of numbers or dates: 'NA' 20" in (
        config_text
    )
    config = yaml.safe_load(config_text)
    assert config['example_gen']['null_markers'] == ['NA', 'NaN', 'null', 'None']


def test_a_label_of_numbers_but_for_a_few_texts_is_refused_naming_them(tmp_path, capsys):
    rows = [(i, 'n/a' if i % 50 == 0 else i * 2.5) for i in range(120)]
    _write(tmp_path / 'data' / 'part.csv', ('x', 'amount'), rows)
    assert init_command.run(_args(tmp_path, 'amount')) == 2
    error = capsys.readouterr().err
    assert error.startswith(
        "asynctrain init: --label: 'amount' is numbers but for 3 cells ('n/a' x3): read as text"
    )
    assert 'pass --null-marker for each, or name the task with --task' in error
    # With the marker named, the same label is a regression.
    text = csv_sample.read_text(
        csv_sample.input_files(str(tmp_path / 'data')), csv_dialect.CsvDialect()
    )
    sample = csv_sample.typed(text, ('n/a',))
    assert pipeline_draft.plan_task(sample, 'amount').task == 'regression'
