"""Dates to calendar parts in TensorFlow ops: known dates give Python's `datetime` answers, and a
value that is not a date is not valid (never an error)."""

import datetime

import numpy as np
import pytest
import tensorflow as tf

from asynctrain.components.transform import calendar_parts


def _parts(civil: calendar_parts.Civil) -> list[tuple]:
    fields = (
        civil.valid,
        civil.year,
        civil.month,
        civil.day,
        civil.hour,
        civil.minute,
        civil.day_of_week,
        civil.day_of_year,
    )
    return [tuple(int(v) for v in row) for row in zip(*(f.numpy() for f in fields))]


def _expected(moment: datetime.datetime) -> tuple:
    return (
        1,
        moment.year,
        moment.month,
        moment.day,
        moment.hour,
        moment.minute,
        moment.weekday(),
        moment.timetuple().tm_yday,
    )


def test_civil_arithmetic_matches_python_over_four_centuries_of_days():
    # Every 37th day from 1800 to 2200, leap centuries (2000) and non-leap ones (1900, 2100) in.
    days = np.arange(-62_000, 84_000, 37, dtype=np.int64)
    year, month, day = calendar_parts.civil_from_days(tf.constant(days))
    epoch = datetime.date(1970, 1, 1)
    expected = [epoch + datetime.timedelta(days=int(d)) for d in days]
    assert year.numpy().tolist() == [d.year for d in expected]
    assert month.numpy().tolist() == [d.month for d in expected]
    assert day.numpy().tolist() == [d.day for d in expected]
    back = calendar_parts.days_from_civil(year, month, day)
    assert back.numpy().tolist() == days.tolist()


@pytest.mark.parametrize(
    'text, moment',
    [
        ('2012/01/01', datetime.datetime(2012, 1, 1)),
        ('2012/1/5 7:05', datetime.datetime(2012, 1, 5, 7, 5)),
        ('2014-03-05', datetime.datetime(2014, 3, 5)),
        ('2014-03-05T08:15:00', datetime.datetime(2014, 3, 5, 8, 15)),
        # An offset is read and left aside: the wall-clock time as written is kept.
        ('2014-03-05 08:15:30.25+01:00', datetime.datetime(2014, 3, 5, 8, 15)),
        ('1999-12-31T23:59:59Z', datetime.datetime(1999, 12, 31, 23, 59)),
        ('2016-02-29', datetime.datetime(2016, 2, 29)),
        ('2000-12-31', datetime.datetime(2000, 12, 31)),
        ('  2015-07-04  ', datetime.datetime(2015, 7, 4)),
    ],
)
def test_iso_and_slashed_dates_give_their_calendar_parts(text, moment):
    assert _parts(calendar_parts.parse_text(tf.constant([text]))) == [_expected(moment)]


@pytest.mark.parametrize(
    'text',
    [
        '',
        'yesterday',
        '2014-02-30',  # no such day
        '2015-02-29',  # not a leap year
        '1900-02-29',  # a century that is not a leap year
        '2014-13-01',
        '2014-03-05T25:00:00',
        '2014-03-05T08:61',
        '0000-01-01',
        '14-03-05',
        '2014-03-05 and more',
        '03/05/2014',  # not a format read without `strptime`
    ],
)
def test_a_value_that_is_not_a_date_is_not_valid_and_all_zero(text):
    assert _parts(calendar_parts.parse_text(tf.constant([text]))) == [(0,) * 8]


def test_a_strptime_format_reads_its_fields_and_two_digit_years_as_posix_does():
    civil = calendar_parts.parse_text(
        tf.constant(['05.03.14 08:15', '31.12.99 23:59', '31.12.1999 23:59', '30.02.14 00:00']),
        '%d.%m.%y %H:%M',
    )
    assert _parts(civil) == [
        _expected(datetime.datetime(2014, 3, 5, 8, 15)),
        _expected(datetime.datetime(1999, 12, 31, 23, 59)),
        (0,) * 8,
        (0,) * 8,
    ]


def test_epoch_seconds_and_milliseconds_give_utc_parts_and_absent_values_are_not_valid():
    seconds = [0, 1_394_007_300, -1, 1_700_000_000]
    civil = calendar_parts.parse_epoch(
        tf.constant(seconds, tf.int64), tf.constant([True, True, True, False])
    )
    utc = datetime.timezone.utc
    assert _parts(civil) == [
        *(
            _expected(datetime.datetime.fromtimestamp(s, utc).replace(tzinfo=None))
            for s in seconds[:3]
        ),
        (0,) * 8,
    ]
    millis = calendar_parts.parse_epoch(
        tf.constant([1_394_007_300_999.0, 1e20]), tf.constant([True, True]), 'milliseconds'
    )
    assert _parts(millis) == [_expected(datetime.datetime(2014, 3, 5, 8, 15)), (0,) * 8]
