"""The decisions `asynctrain init` proposes from a CSV sample: the task, each column's transform,
and the evaluation threshold, each with the reason a reviewer reads beside it.

Pure functions over a `csv_sample.CsvSample`; writing the files is `review_files`.
"""

from __future__ import annotations

import dataclasses
import datetime
import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from asynctrain.components.example_gen.csv_sample import CsvSample
from asynctrain.components.shared.feature_types import ColumnType
from asynctrain.components.shared.yaml_config import ConfigError
from asynctrain.components.transform import datetime_formats
from asynctrain.components.transform import feature_config as fc
from asynctrain.pipelines.init import column_roles, datetime_draft, label_skew, wording

# An int label with at most this many distinct values is a class label.
MAX_INT_CLASSES = 20
# A string (or a few-valued int) column with at most MAX_VOCABULARY distinct values gets a
# vocabulary; one with more, or with more than half its cells distinct, is hashed into 2x its
# distinct values in buckets, up to MAX_HASH_BUCKETS (10^6 ids: 2^21, a table the PS shard).
MAX_VOCABULARY = 1000
MAX_HASH_BUCKETS = 1 << 21
# An id column (every value unique) says nothing that generalizes; fewer rows than this cannot
# tell an id from a small sample.
MIN_ROWS_FOR_ID = 20
# The proposed threshold closes this share of the gap between the trivial baseline (majority
# class, mean predictor, AUC 0.5) and a perfect model.
THRESHOLD_MARGIN = 0.2


@dataclasses.dataclass(frozen=True)
class ColumnPlan:
    """One column's draft preprocessing.

    Attributes:
      name: The column.
      transform: The features.yaml transform, or None when the column is left out.
      options: The transform's options (top_k, oov_buckets, num_buckets, fill).
      reason: Why, in a few words (written as the line's comment).
    """

    name: str
    transform: str | None
    options: dict
    reason: str


@dataclasses.dataclass(frozen=True)
class TaskPlan:
    """What the label column asks for.

    Attributes:
      column: The label column.
      task: binary, multiclass or regression.
      classes: Classification: (value, count) per class, most frequent first.
      positive: Binary: the positive class's value.
      reason: Why this task.
      skew: Regression: the label's skewness (`label_skew`), which sets how long to train.
    """

    column: str
    task: str
    classes: tuple[tuple[str | int, int], ...]
    positive: str | int | None
    reason: str
    skew: label_skew.SkewPlan | None = None


@dataclasses.dataclass(frozen=True)
class ThresholdPlan:
    """The evaluation gate.

    Attributes:
      metric: The blessing metric (AUC, Accuracy, RMSE).
      bound: `min_value` (AUC, Accuracy) or `max_value` (RMSE).
      value: The threshold.
      baseline: The trivial model's value of the metric on the sample.
      reason: How it was proposed.
      max_regression: For daily retraining against the last blessed model: the largest drop
        (rise for RMSE) allowed, a tenth of the gap between the threshold and the baseline.
    """

    metric: str
    bound: str
    value: float
    baseline: float
    reason: str

    @property
    def max_regression(self) -> float:
        return float(f'{abs(self.value - self.baseline) / 10:.3g}')


def _value_counts(cells: pa.Array) -> list[tuple[str | int, int]]:
    counts = pc.value_counts(cells.drop_null())
    pairs = [(v.as_py(), int(c.as_py())) for v, c in zip(counts.field(0), counts.field(1))]
    # Most frequent first; ties by value, so the order does not depend on the file's.
    return sorted(pairs, key=lambda pair: (-pair[1], str(pair[0])))


def plan_task(
    sample: CsvSample, label: str, task: str = 'auto', positive: str | None = None
) -> TaskPlan:
    """The task for `label`: `auto` picks classification for a string label or an int label with
    at most MAX_INT_CLASSES values (binary with exactly 2; the positive class is the rarer one
    unless `positive` names it), regression for a float label."""
    if label not in sample.columns:
        raise ConfigError(
            f'--label: no column {label!r} in {sample.files[0]}; columns: {list(sample.names)}'
        )
    cells = sample.columns[label]
    column_type = sample.types[label]
    if column_type == ColumnType.UNKNOWN or len(cells.drop_null()) == 0:
        raise ConfigError(f'--label: column {label!r} is empty: no row of the sample has a value')
    classes = _value_counts(cells) if column_type != ColumnType.FLOAT else []
    if task == 'auto':
        if column_type == ColumnType.BYTES:
            task, reason = _classification(len(classes)), 'a string label'
        elif column_type == ColumnType.INT and len(classes) <= MAX_INT_CLASSES:
            task = _classification(len(classes))
            reason = f'an int label with {len(classes)} values (<= {MAX_INT_CLASSES})'
        else:
            task = 'regression'
            reason = (
                'a float label'
                if column_type == ColumnType.FLOAT
                else f'an int label with {len(classes)} values (> {MAX_INT_CLASSES})'
            )
    else:
        reason = 'asked for with --task'
    if task in ('binary', 'multiclass') and len(classes) < 2:
        raise ConfigError(f'--label: column {label!r} has one value only: nothing to learn')
    if task == 'binary' and len(classes) != 2:
        raise ConfigError(
            f'--task binary: column {label!r} has {len(classes)} values, not 2: '
            f'{[value for value, _ in classes[:5]]}'
        )
    if task == 'regression' and column_type == ColumnType.BYTES:
        raise ConfigError(f'--task regression: column {label!r} holds text, not numbers')
    chosen = None
    if task == 'binary':
        values = [value for value, _ in classes]
        if positive is None:
            chosen = classes[-1][0]
            reason += f'; positive class {chosen!r}, the rarer one'
        else:
            matches = [value for value in values if str(value) == str(positive)]
            if not matches:
                raise ConfigError(f'--positive: {positive!r} is not a value of {label!r}: {values}')
            chosen = matches[0]
            reason += f'; positive class {chosen!r}, as --positive says'
    skew = None
    if task == 'regression':
        skew = label_skew.plan_skew(np.asarray(cells.drop_null().to_numpy(), np.float64))
    return TaskPlan(
        column=label,
        task=task,
        classes=tuple(classes) if task != 'regression' else (),
        positive=chosen,
        reason=reason,
        skew=skew,
    )


def _classification(num_classes: int) -> str:
    return 'binary' if num_classes == 2 else 'multiclass'


def plan_columns(sample: CsvSample, label: str) -> list[ColumnPlan]:
    """One ColumnPlan per column but the label, in file order."""
    plans = []
    for name in sample.names:
        if name == label:
            continue
        cells = sample.columns[name]
        present = cells.drop_null()
        column_type = sample.types[name]
        distinct = len(pc.unique(present)) if len(present) else 0
        if distinct == 0:
            plans.append(ColumnPlan(name, None, {}, 'left out: every cell is missing'))
        elif distinct == 1:
            value = present[0].as_py()
            plans.append(ColumnPlan(name, None, {}, f'left out: constant ({value!r} everywhere)'))
        elif dates := plan_datetime(name, present, column_type):
            plans.append(dates)
        elif (
            column_type != ColumnType.FLOAT
            and distinct == len(present) == sample.rows
            and sample.rows >= MIN_ROWS_FOR_ID
        ):
            plans.append(
                ColumnPlan(
                    name, None, {}, f'left out: an id, every one of {distinct} values unique'
                )
            )
        elif column_type == ColumnType.INT and (
            role := column_roles.int_role(name, present.to_numpy(zero_copy_only=False))
        ):
            plans.append(_role_plan(name, role, distinct, len(present)))
        elif column_type == ColumnType.FLOAT or (
            column_type == ColumnType.INT and distinct > MAX_INT_CLASSES
        ):
            missing = sample.rows - len(present)
            plans.append(
                ColumnPlan(
                    name,
                    'zscore',
                    {'fill': 'mean'},
                    f'numeric, {distinct} values'
                    + (f', {missing} missing (filled with the mean)' if missing else ''),
                )
            )
        elif column_type == ColumnType.BYTES and (
            distinct > MAX_VOCABULARY or distinct > len(present) // 2
        ):
            buckets = _hash_buckets(distinct)
            plans.append(
                ColumnPlan(
                    name,
                    'hash',
                    {'num_buckets': buckets},
                    f'{distinct} distinct strings in {len(present)} cells: too many for a vocabulary;'
                    f' hashed into {buckets} buckets (2x the distinct values, at most 2^21)',
                )
            )
        else:
            kind = 'string' if column_type == ColumnType.BYTES else 'int'
            plans.append(
                ColumnPlan(
                    name,
                    'vocabulary',
                    {'top_k': distinct, 'oov_buckets': 1},
                    f'{kind} with {distinct} distinct values',
                )
            )
    return plans


def _hash_buckets(distinct: int) -> int:
    return min(MAX_HASH_BUCKETS, 1 << math.ceil(math.log2(2 * distinct)))


def _role_plan(name: str, role: column_roles.IntRole, distinct: int, cells: int) -> ColumnPlan:
    """A vocabulary of the values a role can take (all 24 hours, even if the sample lacks one),
    or, for a code with too many values for one, hashed ids."""
    if role.role == 'code' and (distinct > MAX_VOCABULARY or distinct > cells // 2):
        buckets = _hash_buckets(distinct)
        return ColumnPlan(
            name,
            'hash',
            {'num_buckets': buckets},
            f'{role.reason}; {distinct} values in {cells} cells: hashed into {buckets} buckets',
        )
    top_k = max(role.size, distinct)
    return ColumnPlan(name, 'vocabulary', {'top_k': top_k, 'oov_buckets': 1}, role.reason)


def plan_datetime(name: str, present: pa.Array, column_type: ColumnType) -> ColumnPlan | None:
    """A `datetime` plan for a column of dates (text) or of epoch instants (numbers named as
    times), with the parts its resolution has; None for any other column."""
    if column_type == ColumnType.BYTES:
        values = [v for v in pc.unique(present).to_pylist()]
        parsed = {v: datetime_draft.parse_date(v) for v in values}
        counts = pc.value_counts(present)
        good = sum(
            int(c.as_py()) for v, c in zip(counts.field(0), counts.field(1)) if parsed[v.as_py()]
        )
        if not len(present) or good < datetime_draft.MIN_DATE_SHARE * len(present):
            return None
        moments = sorted(m for m in parsed.values() if m)
        bad = len(present) - good
        with_time = any(m.hour or m.minute for m in moments)
        what = f'dates{" and times" if with_time else ""} from {moments[0]:%Y-%m-%d} to {moments[-1]:%Y-%m-%d}'
        tail = f', {bad} cells that do not parse become missing' if bad else ''
    elif column_type in (ColumnType.INT, ColumnType.FLOAT) and datetime_draft.EPOCH_NAME.search(
        name
    ):
        numbers = np.asarray(present.to_numpy(zero_copy_only=False), np.float64)
        unit = next(
            (
                unit
                for unit, scale in datetime_formats.EPOCH_UNITS.items()
                if len(numbers)
                and (numbers >= datetime_draft.MIN_EPOCH_SECONDS * scale).all()
                and (numbers < datetime_draft.MAX_EPOCH_SECONDS * scale).all()
            ),
            None,
        )
        if unit is None:
            return None
        seconds = numbers // datetime_formats.EPOCH_UNITS[unit]
        with_time = bool((seconds % 86_400).any())
        first, last = (
            datetime.datetime.fromtimestamp(x, datetime.timezone.utc)
            for x in (seconds.min(), seconds.max())
        )
        what = f'{unit} since 1970 (by its name and range: {first:%Y-%m-%d} to {last:%Y-%m-%d} UTC)'
        tail = ''
        moments = [
            datetime.datetime.fromtimestamp(x, datetime.timezone.utc) for x in np.unique(seconds)
        ]
    else:
        return None
    parts = datetime_formats.DATE_PARTS + (datetime_formats.TIME_PARTS if with_time else ())
    constant = datetime_draft.constant_parts(moments, parts)
    if constant:
        parts = tuple(part for part in parts if part not in constant)
        tail += '; left out, constant: ' + ', '.join(f'{p} ({v})' for p, v in constant.items())
    if not parts:
        return ColumnPlan(name, None, {}, f'left out: {what}, every calendar part constant{tail}')
    options = {'parts': list(parts)}
    if column_type != ColumnType.BYTES:
        options['unit'] = unit
    return ColumnPlan(
        name,
        fc.DATETIME,
        options,
        f'{what}: calendar parts'
        f'{" with the time of day" if set(parts) & set(datetime_formats.TIME_PARTS) else ""}{tail}',
    )


# The least `max_bad_fraction` proposed: 1 row in 100 may be bad before a run fails.
MIN_BAD_FRACTION = 0.01


@dataclasses.dataclass(frozen=True)
class BadRowsPlan:
    """How many rejected rows a run tolerates.

    Attributes:
      max_bad_fraction: `example_gen.max_bad_fraction`.
      reason: What the sample showed.
    """

    max_bad_fraction: float
    reason: str


def plan_bad_rows(sample: CsvSample, label: str) -> BadRowsPlan:
    """ExampleGen rejects a row without its label, and one it cannot read, into the dead letter
    and fails the run when their share is above `max_bad_fraction`: twice the sample's share
    (rounded up), so the run accepts data like it, and never less than MIN_BAD_FRACTION, so that
    a later day's first bad row does not fail a run whose sample had none."""
    missing = sample.rows - len(sample.columns[label].drop_null())
    total = sample.rows + sample.rejected
    bad = missing + sample.rejected
    floor = f'at least {MIN_BAD_FRACTION:.0%}, so a few bad rows of a later input go to the dead letter instead of failing the run'
    if not bad:
        return BadRowsPlan(
            MIN_BAD_FRACTION,
            f'every row of the sample is readable and has its label; {floor}',
        )
    seen = bad / total
    fraction = min(1.0, max(MIN_BAD_FRACTION, math.ceil(2 * seen * 1000) / 1000))
    return BadRowsPlan(
        fraction,
        f'{wording.rows(missing)} without {label!r} and {sample.rejected:,} unreadable of '
        f'{total:,} '
        f'({seen:.2%}) go to the dead letter; twice that share is allowed, {floor}',
    )


def plan_threshold(sample: CsvSample, task: TaskPlan) -> ThresholdPlan:
    """The blessing threshold: THRESHOLD_MARGIN of the way from the trivial model's value on the
    sample to a perfect model's."""
    margin = f'{THRESHOLD_MARGIN:.0%}'
    if task.task == 'binary':
        value = 0.5 + THRESHOLD_MARGIN * 0.5
        return ThresholdPlan(
            'AUC',
            'min_value',
            round(value, 3),
            0.5,
            f'AUC {value:.3f}: {margin} of the way from a constant score (AUC 0.5) to 1',
        )
    if task.task == 'multiclass':
        total = sum(count for _, count in task.classes)
        majority = task.classes[0][1] / total
        value = majority + THRESHOLD_MARGIN * (1 - majority)
        return ThresholdPlan(
            'Accuracy',
            'min_value',
            round(value, 3),
            round(majority, 4),
            f'accuracy {value:.3f}: {margin} of the way from always predicting the majority class '
            f'{task.classes[0][0]!r} (accuracy {majority:.3f}) to 1',
        )
    labels = np.asarray(sample.columns[task.column].drop_null().to_numpy(), np.float64)
    spread = float(labels.std())
    value = (1 - THRESHOLD_MARGIN) * spread
    return ThresholdPlan(
        'RMSE',
        'max_value',
        float(f'{value:.4g}'),
        spread,
        f"RMSE {value:.4g}: {margin} below the mean predictor's RMSE ({spread:.4g}, the "
        "label's standard deviation)",
    )
