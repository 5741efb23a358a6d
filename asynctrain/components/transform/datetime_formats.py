"""The `datetime` transform's side of `features.yaml`: the calendar parts it gives, the text
formats it reads, the `strptime` directives it takes, and the checks of a feature's datetime
fields. No TensorFlow: `feature_config` (read before TensorFlow loads) and `asynctrain init` use
it; `calendar_parts` does the reading in graph ops with the same expressions.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from tensorflow_metadata.proto.v0 import schema_pb2

from asynctrain.components.shared import yaml_config

# A `feature_config.FeatureSpec` (not imported: feature_config imports this module).
FeatureSpec = Any

DATETIME = 'datetime'

# The calendar parts a `datetime` feature can give, each one transformed feature named
# `<feature>_<part>` (the cyclical day of year gives two, `_day_of_year_sin` and `_cos`).
DATETIME_PARTS = (
    'year',
    'month',
    'day',
    'day_of_week',
    'day_of_year',
    'day_of_year_cyclical',
    'hour',
    'minute',
)
# What a date gives, and what a time adds (the proposal `asynctrain init` writes; measured on
# datasets/seattle_weather, docs/datetime-and-compressed-input.md).
DATE_PARTS = ('year', 'month', 'day', 'day_of_week', 'day_of_year_cyclical')
TIME_PARTS = ('hour', 'minute')
# The 0/1 feature every `datetime` feature also gives: 1 where the value is missing or does not
# parse (its parts then take their fill), so a model can tell a fill from a real date and the
# share of bad values shows in Transform's statistics.
DATETIME_MISSING = 'missing'
# Categorical parts: ids 0..n-1, and id n for a missing value.
DATETIME_PART_IDS = {'month': 12, 'day': 31, 'day_of_week': 7, 'hour': 24, 'minute': 60}
# `unit` of a numeric (epoch) datetime column.
EPOCH_UNITS = {'seconds': 1, 'milliseconds': 1000}
# The strptime directives `strptime` may use, and the regular expression each reads.
STRPTIME_DIRECTIVES = {
    'Y': r'(\d{4})',
    'y': r'(\d{2})',
    'm': r'(\d{1,2})',
    'd': r'(\d{1,2})',
    'H': r'(\d{1,2})',
    'M': r'(\d{2})',
    'S': r'(\d{2})',
}
_TIME_OF_DAY = r'(?:[T ](\d{1,2}):(\d{2})(?::(\d{2})(?:[.,]\d+)?)?)?'
# The text formats read without a `strptime`, as (regular expression, the field each group is):
# ISO 8601 dates and datetimes (an offset or Z accepted and ignored), and YYYY/MM/DD. The same
# expressions serve the Transform graph (RE2) and `asynctrain init` (Python's re).
DATE_FORMATS = (
    (r'(\d{4})-(\d{2})-(\d{2})' + _TIME_OF_DAY + r'(?:Z|[+-]\d{2}(?::?\d{2})?)?', 'YmdHMS'),
    (r'(\d{4})/(\d{1,2})/(\d{1,2})' + _TIME_OF_DAY, 'YmdHMS'),
)


def strptime_pattern(strptime: str) -> tuple[str, str]:
    """(regular expression, the field of each group) reading text in the `strptime` format.

    Raises:
      ValueError: a directive outside `STRPTIME_DIRECTIVES`, one given twice, or no year, month
        or day.
    """
    pattern, fields, i = [], '', 0
    while i < len(strptime):
        char = strptime[i]
        if char != '%':
            pattern.append(re.escape(char))
            i += 1
            continue
        directive = strptime[i + 1 : i + 2]
        if directive == '%':
            pattern.append('%')
        elif directive in STRPTIME_DIRECTIVES:
            year_twice = directive in 'Yy' and ('Y' in fields or 'y' in fields)
            if directive in fields or year_twice:
                raise ValueError(f'%{directive} given twice')
            pattern.append(STRPTIME_DIRECTIVES[directive])
            fields += directive
        else:
            raise ValueError(
                f'unsupported directive %{directive}; allowed: '
                + ' '.join(f'%{d}' for d in STRPTIME_DIRECTIVES)
            )
        i += 2
    if not ('Y' in fields or 'y' in fields) or 'm' not in fields or 'd' not in fields:
        raise ValueError('needs a year (%Y or %y), a month (%m) and a day (%d)')
    return ''.join(pattern), fields


def check(spec: FeatureSpec, column_type: int, where: str) -> None:
    """Checks a feature's datetime fields; a ConfigError naming `where` and the field if wrong."""
    if spec.transform != DATETIME:
        for key in ('parts', 'strptime'):
            if getattr(spec, key):
                yaml_config.fail(f'{where}: {key}', 'only a datetime feature takes it')
        return
    for part in spec.parts:
        if part not in DATETIME_PARTS:
            yaml_config.fail(
                f'{where}: parts', f'unknown part {part!r}; allowed: {list(DATETIME_PARTS)}'
            )
    if len(set(spec.parts)) != len(spec.parts):
        yaml_config.fail(f'{where}: parts', f'a part listed twice: {list(spec.parts)}')
    if spec.strptime:
        if column_type != schema_pb2.BYTES:
            yaml_config.fail(f'{where}: strptime', 'only a text (BYTES) column takes a format')
        try:
            strptime_pattern(spec.strptime)
        except ValueError as e:
            yaml_config.fail(f'{where}: strptime', f'{spec.strptime!r}: {e}')
    if spec.unit not in EPOCH_UNITS:
        yaml_config.fail(f'{where}: unit', f'got {spec.unit!r}; allowed: {list(EPOCH_UNITS)}')


def with_parts(spec: FeatureSpec, column_type: int) -> FeatureSpec:
    """A datetime feature with its parts listed: a number (an instant) has a time of day too."""
    if spec.transform != DATETIME or spec.parts:
        return spec
    parts = spec.datetime_parts
    if column_type != schema_pb2.BYTES:
        parts = DATE_PARTS + TIME_PARTS
    return dataclasses.replace(spec, parts=parts)


def check_output_names(specs: list[FeatureSpec], types: Mapping[str, int]) -> None:
    """A datetime feature's parts are features of their own: their names must be free."""
    seen: dict[str, str] = {}
    for i, spec in enumerate(specs):
        for output in spec.output_names:
            taken = seen.get(output) or (
                'a column of the schema' if output != spec.name and output in types else ''
            )
            if taken:
                yaml_config.fail(
                    f'features[{i}] ({spec.name})',
                    f'its transformed feature {output!r} is also {taken}',
                )
            seen[output] = f'a transformed feature of {spec.name!r}'
