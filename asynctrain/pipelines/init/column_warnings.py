"""The warnings `asynctrain init` writes beside a column's transform, for the reviewer: a column
mostly missing (its fill stands in for most cells) and values far beyond the rest (they set a
z-score's mean and standard deviation), each with the column's numbers."""

from __future__ import annotations

import dataclasses

import numpy as np

from asynctrain.components.example_gen.csv_sample import CsvSample
from asynctrain.components.shared.feature_types import ColumnType
from asynctrain.pipelines.init import wording
from asynctrain.pipelines.init.pipeline_draft import ColumnPlan

# A column with at least this share of its cells missing is mostly missing.
MOSTLY_MISSING = 0.5
# A value is far beyond the rest when it is more than this many times as far from the median as
# the 99th (or 1st) percentile is. A long right tail stays within it: diamonds' largest price,
# 18,823, is 1.1 times as far as the 99th percentile; issue 47's 1,048 against a 99th percentile of
# 26.5 was about 60 times.
OUTLIER_FACTOR = 10


def mostly_missing(plan: ColumnPlan, missing: int, rows: int) -> str | None:
    """The warning for a used column with at least MOSTLY_MISSING of its cells missing."""
    if not rows or missing < MOSTLY_MISSING * rows:
        return None
    fill = (
        'the mean fills them'
        if plan.transform == 'zscore'
        else 'the transform reads them as missing'
    )
    return (
        f'{missing / rows:.0%} missing ({missing:,} of {wording.rows(rows)}): {fill}, so it '
        'says little for most rows'
    )


def _side(values: np.ndarray, median: float, bound: float, above: bool) -> str | None:
    reach = abs(bound - median)
    far = np.abs(values - median) > OUTLIER_FACTOR * reach
    far &= values > median if above else values < median
    if not reach or not far.any():
        return None
    extreme = np.sort(values[far])
    rest = values[~far & (values > median if above else values < median)]
    shown = extreme[::-1] if above else extreme
    listed = ', '.join(wording.value(v) for v in shown[:3]) + (', ...' if len(shown) > 3 else '')
    nearest = (
        f', the next {"largest" if above else "smallest"} value '
        f'{wording.value(rest.max() if above else rest.min())}'
        if len(rest)
        else ''
    )
    return (
        f'{wording.count(len(extreme), "value")} far {"above" if above else "below"} the rest: '
        f'{listed} (the {"99th" if above else "1st"} percentile is {wording.value(bound)}'
        f'{nearest})'
    )


def outliers(values: np.ndarray) -> str | None:
    """The warning for values more than OUTLIER_FACTOR times as far from the median as the 99th
    (or 1st) percentile, or None."""
    values = np.asarray(values, np.float64)
    values = values[np.isfinite(values)]
    if len(values) < 100:
        return None
    low, median, high = np.percentile(values, [1, 50, 99])
    found = [
        side
        for side in (_side(values, median, high, True), _side(values, median, low, False))
        if side
    ]
    if not found:
        return None
    return '; '.join(found) + ": the z-score's mean and standard deviation include them"


def zscored_values(sample: CsvSample, plan: ColumnPlan) -> np.ndarray | None:
    """The present values of a numeric column `plan` z-scores; None for any other plan."""
    if plan.transform != 'zscore' or sample.types[plan.name] not in (
        ColumnType.INT,
        ColumnType.FLOAT,
    ):
        return None
    return sample.columns[plan.name].drop_null().to_numpy(zero_copy_only=False)


def with_warnings(sample: CsvSample, plan: ColumnPlan) -> ColumnPlan:
    """`plan` with its column's warnings appended to the reason (`; WARNING: ...`)."""
    if plan.transform is None:
        return plan
    cells = sample.columns[plan.name]
    present = cells.drop_null()
    warnings = [mostly_missing(plan, sample.rows - len(present), sample.rows)]
    values = zscored_values(sample, plan)
    if values is not None:
        warnings.append(outliers(values))
    text = ''.join(f'; WARNING: {warning}' for warning in warnings if warning)
    return dataclasses.replace(plan, reason=plan.reason + text) if text else plan
