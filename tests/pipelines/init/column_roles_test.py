"""`asynctrain init`'s roles of integer columns: the role and the reason proposed from a column's
name and values, and the transform `plan_columns` writes for them."""

from __future__ import annotations

import random

import numpy as np
import pytest

from asynctrain.components.example_gen import csv_dialect, csv_sample
from asynctrain.pipelines.init import column_roles, pipeline_draft


@pytest.mark.parametrize(
    'name, values, role, size, reason',
    [
        (
            'hr',
            range(24),
            'hour',
            24,
            'an hour of the day by its name (values 0 to 23): categorical',
        ),
        ('tripStartHour', range(24), 'hour', 24, None),
        ('weekday', range(7), 'weekday', 7, None),
        ('day_of_week', range(1, 8), 'weekday', 7, None),
        # Named only a day, with the values 1-7: the taxi data's trip_start_day (Sunday is 1).
        (
            'trip_start_day',
            range(1, 8),
            'weekday',
            7,
            'a day of the week: named a day, values 1 to 7 only: categorical',
        ),
        (
            'day',
            range(1, 32),
            'day',
            31,
            'a day of the month by its name (values 1 to 31): categorical',
        ),
        ('mnth', range(1, 13), 'month', 12, 'a month by its name (values 1 to 12): categorical'),
        (
            'station_id',
            range(100, 140),
            'code',
            40,
            "a code by its name ('id'), 40 values: categorical",
        ),
        ('Postal Code', range(40), 'code', 40, None),
        # No word of the name, but every value 11 digits wide and repeated: census tracts.
        (
            'pickup_census',
            [17031081500 + i for i in range(40)] * 3,
            'code',
            40,
            'a code: every value 11 digits wide, 40 values repeated: categorical',
        ),
    ],
)
def test_an_int_column_gets_the_role_its_name_and_values_show(name, values, role, size, reason):
    found = column_roles.int_role(name, np.asarray(list(values)))
    assert (found.role, found.size) == (role, size)
    if reason:
        assert found.reason == reason


@pytest.mark.parametrize(
    'name, values',
    [
        ('hr', range(30)),  # a heart rate, or anything past 23: not an hour
        ('items', range(24)),  # 0-23 without a name that says hour: a count
        ('month', range(1, 14)),
        ('day', range(0, 31)),  # a day 0: a count of days
        ('age', range(19, 80)),
        ('price', [10_000 + 7 * i for i in range(500)]),  # 5 digits wide but no value repeats
        ('hours', range(24)),  # a duration, not an hour of the day
    ],
)
def test_a_quantity_keeps_no_role(name, values):
    assert column_roles.int_role(name, np.asarray(list(values))) is None


def test_name_words_split_case_and_punctuation():
    assert column_roles.name_words('tripStartHour') == ('trip', 'start', 'hour')
    assert column_roles.name_words('Day of Week (1-7)') == ('day', 'of', 'week', '1', '7')


def test_plan_columns_proposes_a_vocabulary_of_the_whole_range_with_the_reason(tmp_path):
    rng = random.Random(0)
    rows = [
        (h % 24, rng.randrange(1, 29), 1000 + rng.randrange(40), rng.randrange(24), rng.random())
        for h in range(400)
    ]
    (tmp_path / 'data').mkdir()
    (tmp_path / 'data' / 'rides.csv').write_text(
        'hour,day,station_code,count,y\n' + ''.join(','.join(map(str, r)) + '\n' for r in rows)
    )
    sample = csv_sample.read_sample(
        csv_sample.input_files(str(tmp_path / 'data')), csv_dialect.CsvDialect()
    )
    plans = {plan.name: plan for plan in pipeline_draft.plan_columns(sample, label='y')}
    assert (plans['hour'].transform, plans['hour'].options) == (
        'vocabulary',
        {'top_k': 24, 'oov_buckets': 1},
    )
    assert plans['hour'].reason == 'an hour of the day by its name (values 0 to 23): categorical'
    # 28 days seen in the sample; all 31 get an id.
    assert plans['day'].options == {'top_k': 31, 'oov_buckets': 1}
    assert plans['station_code'].transform == 'vocabulary'
    assert plans['station_code'].options == {'top_k': 40, 'oov_buckets': 1}
    assert plans['station_code'].reason == "a code by its name ('code'), 40 values: categorical"
    # 0-23 in a column not named as an hour: a count, as before.
    assert plans['count'].transform == 'zscore'
    assert plans['count'].reason == 'numeric, 24 values'
