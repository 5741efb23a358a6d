"""`asynctrain init`'s warnings for the reviewer, with their numbers: mostly-missing columns,
values far beyond the rest, constant calendar parts; and the wording of its counts."""

from __future__ import annotations

import datetime

import numpy as np
import pyarrow as pa
import pytest

from asynctrain.components.example_gen import csv_dialect, csv_sample
from asynctrain.components.shared.feature_types import ColumnType
from asynctrain.components.transform import datetime_formats
from asynctrain.pipelines.init import column_warnings, datetime_draft, pipeline_draft, wording


def _sample(tmp_path, text):
    (tmp_path / 'data').mkdir(parents=True)
    (tmp_path / 'data' / 'part.csv').write_text(text)
    return csv_sample.read_sample(
        csv_sample.input_files(str(tmp_path / 'data')), csv_dialect.CsvDialect()
    )


def test_a_mostly_missing_column_is_named_with_its_share(tmp_path):
    # 'sparse' has a value in 1 row of 5: 80% missing.
    rows = ''.join(f'{i},{"" if i % 5 else i * 0.5},{i % 3}\n' for i in range(200))
    sample = _sample(tmp_path, 'x,sparse,y\n' + rows)
    plans = {
        plan.name: column_warnings.with_warnings(sample, plan)
        for plan in pipeline_draft.plan_columns(sample, 'y')
    }
    assert plans['sparse'].reason == (
        'numeric, 40 values, 160 missing (filled with the mean); WARNING: 80% missing (160 of '
        '200 rows): the mean fills them, so it says little for most rows'
    )
    assert 'WARNING' not in plans['x'].reason


def test_values_far_beyond_the_rest_are_named_with_the_percentile_and_the_next_value():
    # The column: a 99th percentile of 26.5, a next largest value of 42.6, and 1,048.
    values = np.concatenate([np.linspace(0, 26.5, 990), [30.1, 31, 33, 35, 36, 38, 40, 41, 42.6]])
    values = np.append(values, 1048)
    high = np.percentile(values, 99)
    warning = column_warnings.outliers(values)
    assert warning == (
        f'1 value far above the rest: 1,048 (the 99th percentile is {wording.value(high)}, the '
        "next largest value 42.6): the z-score's mean and standard deviation include them"
    )
    # A long right tail is not an outlier: exponential values, largest about 9 times the median.
    tail = np.random.default_rng(0).exponential(size=10_000)
    assert column_warnings.outliers(tail) is None
    low = column_warnings.outliers(-values)
    assert low.startswith('1 value far below the rest: -1,048 (the 1st percentile is ')


def test_the_outlier_warning_reaches_the_columns_reason(tmp_path):
    values = [i % 27 for i in range(300)] + [1048]
    sample = _sample(tmp_path, 'w,y\n' + ''.join(f'{v},{i % 2}\n' for i, v in enumerate(values)))
    (plan,) = pipeline_draft.plan_columns(sample, 'y')
    reason = column_warnings.with_warnings(sample, plan).reason
    assert reason.startswith(
        'numeric, 28 values; WARNING: 1 value far above the rest: 1,048 (the 99th percentile is 26, '
        'the next largest value 26)'
    )


def test_constant_calendar_parts_are_left_out_with_their_value():
    moments = [datetime.datetime(2016, 3, d, 12, 30) for d in range(1, 20)]
    constant = datetime_draft.constant_parts(
        moments, datetime_formats.DATE_PARTS + datetime_formats.TIME_PARTS
    )
    assert constant == {'year': 2016, 'month': 3, 'hour': 12, 'minute': 30}


def test_a_date_column_within_one_year_gets_no_year(tmp_path):
    dates = [datetime.date(2016, 1, 1) + datetime.timedelta(days=i) for i in range(300)]
    present = pa.array([f'{d:%Y-%m-%d}' for d in dates])
    plan = pipeline_draft.plan_datetime('date', present, ColumnType.BYTES)
    assert plan.options['parts'] == ['month', 'day', 'day_of_week', 'day_of_year_cyclical']
    assert plan.reason == (
        'dates from 2016-01-01 to 2016-10-26: calendar parts; left out, constant: year (2016)'
    )


def test_epoch_instants_at_one_hour_keep_their_minutes_out(tmp_path):
    start = datetime.datetime(2020, 5, 1, 8, tzinfo=datetime.timezone.utc).timestamp()
    seconds = pa.array([int(start) + 86_400 * i for i in range(40)])
    plan = pipeline_draft.plan_datetime('created_at', seconds, ColumnType.INT)
    assert plan.options['parts'] == ['month', 'day', 'day_of_week', 'day_of_year_cyclical']
    assert plan.reason.endswith('; left out, constant: year (2020), hour (8), minute (0)')


@pytest.mark.parametrize('n, text', [(1, '1 row'), (0, '0 rows'), (8645, '8,645 rows')])
def test_row_counts_agree_in_number(n, text):
    assert wording.rows(n) == text


def test_a_slice_names_its_rarest_value_as_a_value(tmp_path):
    from asynctrain.pipelines.init import slice_draft

    rows = [(v, i % 2) for i, v in enumerate([5] * 68 + [7] * 100 + [9] * 90)]
    sample = _sample(tmp_path, 'grade,y\n' + ''.join(f'{g},{y}\n' for g, y in rows))
    columns = pipeline_draft.plan_columns(sample, 'y')
    task = pipeline_draft.plan_task(sample, 'y')
    threshold = pipeline_draft.plan_threshold(sample, task)
    plan = slice_draft.plan_slices(sample, columns, threshold, task)
    assert (
        plan.reasons['grade'] == '3 values, the rarest value 5, with 68 of 258 rows in the sample'
    )
    one = _sample(
        tmp_path / 'one',
        'grade,y\n' + ''.join(f'{g},{i % 2}\n' for i, g in enumerate([1] + [2] * 40 + [3] * 40)),
    )
    plan = slice_draft.plan_slices(
        one, pipeline_draft.plan_columns(one, 'y'), threshold, pipeline_draft.plan_task(one, 'y')
    )
    assert plan.reasons['grade'] == (
        'not sliced: its rarest value 1 has 1 row in the sample (fewer than 30)'
    )
