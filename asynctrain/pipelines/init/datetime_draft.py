"""What `asynctrain init` reads as dates: the text formats and epoch instants the `datetime`
transform reads, and the calendar parts that vary over a column's moments (`pipeline_draft`'s
`plan_datetime` proposes them)."""

from __future__ import annotations

import datetime
import re

from asynctrain.components.transform import datetime_formats

# A text column is read as dates when at least this share of its cells parse as one of the
# formats the `datetime` transform reads without a `strptime` (the rest become missing).
MIN_DATE_SHARE = 0.95
# A numeric column is read as epoch seconds (or milliseconds) when its name says it is a time and
# every value falls between these instants (1980-01-01 and 2100-01-01, UTC).
EPOCH_NAME = re.compile(r'(time|date|timestamp|epoch|(^|_)ts$|_at$)', re.IGNORECASE)
MIN_EPOCH_SECONDS, MAX_EPOCH_SECONDS = 315_532_800, 4_102_444_800


def parse_date(text: str) -> datetime.datetime | None:
    """`text` as the `datetime` transform reads it without a `strptime`, or None."""
    for pattern, fields in datetime_formats.DATE_FORMATS:
        match = re.fullmatch(pattern, text.strip())
        if match:
            values = dict(zip(fields, match.groups()))
            try:
                return datetime.datetime(
                    *(int(values[f] or 0) for f in 'YmdHM'), int(values['S'] or 0) % 60
                )
            except ValueError:
                return None
    return None


# A calendar part's value of a moment, as the `datetime` transform computes it (the cyclical day
# of year is constant when the day of year is).
_PART_VALUES = {
    'year': lambda m: m.year,
    'month': lambda m: m.month,
    'day': lambda m: m.day,
    'day_of_week': lambda m: m.isoweekday(),
    'day_of_year': lambda m: m.timetuple().tm_yday,
    'day_of_year_cyclical': lambda m: m.timetuple().tm_yday,
    'hour': lambda m: m.hour,
    'minute': lambda m: m.minute,
}


def constant_parts(moments: list[datetime.datetime], parts: tuple[str, ...]) -> dict[str, int]:
    """{part: its one value} for the parts of `parts` that take one value over `moments`: a
    feature that says nothing, left out as a constant column is."""
    constant = {}
    for part in parts:
        values = {_PART_VALUES[part](m) for m in moments}
        if len(values) == 1:
            constant[part] = values.pop()
    return constant
