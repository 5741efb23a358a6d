"""Dates and times to calendar parts in TensorFlow ops only, so they run inside the Transform graph.

The `datetime` transform reads a column as a date: text in ISO 8601 (`2014-03-05`,
`2014-03-05T08:15:00`), `YYYY/MM/DD`, or a `strptime` format, or a number of seconds (or
milliseconds) since 1970-01-01 UTC. Text is matched with `tf.strings.regex_full_match`, its
fields cut out with `tf.strings.regex_replace` and read with `tf.strings.to_number`; the day of
the week and of the year come from integer civil-date arithmetic on days since the epoch (Howard
Hinnant's `days_from_civil` / `civil_from_days`, exact over the proleptic Gregorian calendar).
Because it is all graph ops, the exported serving signature takes the raw column as it is in the
CSV and does the same.

A value that does not parse (wrong form, 2014-02-30, hour 25, empty) is not an error: its `valid`
is False and its fields are 0, for the caller to fill. No analyzers here (see `preprocessing`).
"""

from __future__ import annotations

from typing import NamedTuple

import tensorflow as tf

from asynctrain.components.transform import datetime_formats

SECONDS_PER_DAY = 86_400
# Years a date may have; a number outside them (milliseconds read as seconds) is not a date.
MIN_YEAR, MAX_YEAR = 1, 9999


class Civil(NamedTuple):
    """A batch of dates and times, int64 [batch] each; fields are 0 where `valid` is False.

    Attributes:
      valid: Whether the value parsed to a real date and time.
      days: Days since 1970-01-01.
      year, month (1-12), day (1-31), hour (0-23), minute (0-59): as written (the wall clock).
    """

    valid: tf.Tensor
    days: tf.Tensor
    year: tf.Tensor
    month: tf.Tensor
    day: tf.Tensor
    hour: tf.Tensor
    minute: tf.Tensor

    @property
    def day_of_week(self) -> tf.Tensor:
        """0 for Monday to 6 for Sunday (1970-01-01 was a Thursday, 3); 0 where not valid."""
        return tf.where(self.valid, tf.math.floormod(self.days + 3, 7), 0)

    @property
    def day_of_year(self) -> tf.Tensor:
        """1 for 1 January to 365 or 366 for 31 December; 0 where not valid."""
        first = days_from_civil(self.year, tf.ones_like(self.year), 1)
        return tf.where(self.valid, self.days - first + 1, 0)


def days_from_civil(year: tf.Tensor, month: tf.Tensor, day) -> tf.Tensor:
    """Days since 1970-01-01 of a proleptic Gregorian date (int64 tensors)."""
    year = year - tf.cast(month <= 2, tf.int64)
    era = tf.math.floordiv(year, 400)
    year_of_era = year - era * 400
    shifted_month = tf.math.floormod(month + 9, 12)  # March is 0, February 11
    day_of_shifted_year = (153 * shifted_month + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_shifted_year
    return era * 146_097 + day_of_era - 719_468


def civil_from_days(days: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """(year, month, day) of a number of days since 1970-01-01 (int64 tensors)."""
    z = days + 719_468
    era = tf.math.floordiv(z, 146_097)
    day_of_era = z - era * 146_097
    year_of_era = (
        day_of_era - day_of_era // 1460 + day_of_era // 36_524 - day_of_era // 146_096
    ) // 365
    day_of_shifted_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    shifted_month = (5 * day_of_shifted_year + 2) // 153
    day = day_of_shifted_year - (153 * shifted_month + 2) // 5 + 1
    month = tf.where(shifted_month < 10, shifted_month + 3, shifted_month - 9)
    year = year_of_era + era * 400 + tf.cast(month <= 2, tf.int64)
    return year, month, day


def _from_fields(
    matched: tf.Tensor,
    year: tf.Tensor,
    month: tf.Tensor,
    day: tf.Tensor,
    hour: tf.Tensor,
    minute: tf.Tensor,
    second: tf.Tensor,
) -> Civil:
    in_range = (
        matched
        & (month >= 1)
        & (month <= 12)
        & (day >= 1)
        & (day <= 31)
        & (hour <= 23)
        & (minute <= 59)
        & (second <= 60)
    )
    days = days_from_civil(year, month, day)
    # 2014-02-30 would be 2014-03-02: a date that does not come back the same does not exist.
    same_year, same_month, same_day = civil_from_days(days)
    valid = in_range & tf.equal(same_year, year) & tf.equal(same_month, month)
    valid &= tf.equal(same_day, day) & (year >= MIN_YEAR) & (year <= MAX_YEAR)
    zero = tf.zeros_like(year)
    return Civil(
        valid,
        *(tf.where(valid, field, zero) for field in (days, year, month, day, hour, minute)),
    )


def _group(text: tf.Tensor, matched: tf.Tensor, pattern: str, group: int) -> tf.Tensor:
    """Group `group` of `pattern` in each matched string as int64; 0 where unmatched or empty."""
    digits = tf.strings.regex_replace(text, f'^(?:{pattern})$', f'\\{group}')
    digits = tf.where(matched & (tf.strings.length(digits) > 0), digits, '0')
    return tf.strings.to_number(digits, tf.int64)


def _parse_pattern(text: tf.Tensor, pattern: str, fields: str) -> tuple[tf.Tensor, dict]:
    matched = tf.strings.regex_full_match(text, pattern)
    values = {field: _group(text, matched, pattern, i + 1) for i, field in enumerate(fields)}
    if 'y' in values:
        # POSIX strptime: 69-99 are 1969-1999, 00-68 are 2000-2068.
        short = values.pop('y')
        values['Y'] = tf.where(short >= 69, short + 1900, short + 2000)
    return matched, values


def parse_text(text: tf.Tensor, strptime: str = '') -> Civil:
    """Reads [batch] strings in the `strptime` format, or else in any of `datetime_formats.DATE_FORMATS`."""
    formats = (
        [datetime_formats.strptime_pattern(strptime)]
        if strptime
        else list(datetime_formats.DATE_FORMATS)
    )
    text = tf.strings.strip(text)
    matched = tf.zeros_like(text, tf.bool)
    zero = tf.zeros_like(text, tf.int64)
    fields = {name: zero for name in 'YmdHMS'}
    fields['m'] = fields['d'] = tf.ones_like(zero)
    for pattern, names in formats:
        this, values = _parse_pattern(text, pattern, names)
        first = this & ~matched  # the first format that matches a value reads it
        for name, value in values.items():
            fields[name] = tf.where(first, value, fields[name])
        matched |= this
    return _from_fields(matched, *(fields[name] for name in 'YmdHMS'))


def parse_epoch(number: tf.Tensor, present: tf.Tensor, unit: str = 'seconds') -> Civil:
    """Reads [batch] numbers of `unit`s since 1970-01-01 UTC (floats are floored)."""
    if number.dtype.is_floating:
        number = tf.cast(tf.math.floor(tf.cast(number, tf.float64)), tf.int64)
    seconds = tf.math.floordiv(number, datetime_formats.EPOCH_UNITS[unit])
    days = tf.math.floordiv(seconds, SECONDS_PER_DAY)
    second_of_day = tf.math.floormod(seconds, SECONDS_PER_DAY)
    year, month, day = civil_from_days(days)
    valid = present & (year >= MIN_YEAR) & (year <= MAX_YEAR)
    zero = tf.zeros_like(days)
    return Civil(
        valid,
        *(
            tf.where(valid, field, zero)
            for field in (
                days,
                year,
                month,
                day,
                second_of_day // 3600,
                (second_of_day % 3600) // 60,
            )
        ),
    )
