"""Which numeric columns `asynctrain init` proposes to z-score on a log scale (`log: true`): a
column with no negative value whose skewness between its 1st and 99th percentiles is above
MIN_SKEWNESS: a long right tail of many rows (counts, sums of money), not a few far values, which
`column_warnings` names instead.

Measured (each figure a whole `asynctrain run`; the datasets' READMEs have the commands): on
`datasets/txhousing` (eval RMSE in dollars, HistGradientBoosting 8,597), `sales`, `volume`,
`listings` and `inventory` (skewness 3.81 to 4.30; 2.23 to 3.81 within the percentiles) z-scored
as they are gave 9,385, 9,460 and 9,512 (9 to 11% behind); as log(1 + x), 7,180 (16% ahead). The
label, the median sale price, is close to `volume / sales` (correlation 0.96): log(volume) -
log(sales) is a difference a small network forms, the ratio of two raw z-scores is not. On
`datasets/seattle_weather`, `precipitation` (2.75 within the percentiles) on the log scale gave
eval accuracy 0.7882 against 0.7515 and 0.7475 (HistGradientBoosting 0.7678). No gain where the
tail is a few values: diamonds' `carat`, `table`, `y` and `z` (0.80 to 2.43 over all values,
`y`'s 2.43 from one value of 58.9 mm, 0.33 within the percentiles) gave 575.6 against 565.2 and
569.1 without (HistGradientBoosting 530.9), and `y` alone 575.7; the bundled taxi data's `fare`,
`trip_miles` and `trip_seconds` (15.8, 93.8 and 30.9 over all values; 1.93, 2.59 and 1.79
within) gave tips' RMSE 1.0993 against 1.0534 to 1.1036 without, and `trip_miles` alone, init's
proposal, 1.0941 (HistGradientBoosting 0.9556).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from asynctrain.components.example_gen.csv_sample import CsvSample
from asynctrain.pipelines.init import column_warnings, label_skew
from asynctrain.pipelines.init.pipeline_draft import ColumnPlan

# A numeric column with no negative value whose skewness between its 1st and 99th percentiles is
# above this gets `log: true`.
MIN_SKEWNESS = 2.0


def _within_percentiles(values: np.ndarray) -> np.ndarray:
    low, high = np.percentile(values, [1, 99])
    return values[(values >= low) & (values <= high)]


def log_reason(values: np.ndarray) -> str | None:
    """Why `values` (a column's present cells) are z-scored as log(1 + x), or None when they are
    not: a negative value, or a skewness within the 1st to 99th percentiles at most
    MIN_SKEWNESS."""
    values = np.asarray(values, np.float64)
    values = values[np.isfinite(values)]
    if not len(values) or values.min() < 0:
        return None
    bulk = _within_percentiles(values)
    skew = label_skew.skewness(bulk)
    if skew <= MIN_SKEWNESS:
        return None
    logged = label_skew.skewness(np.log1p(bulk))
    return (
        f'a long right tail (skewness {skew:.2f} > {MIN_SKEWNESS} between the 1st and 99th '
        f'percentiles, no value below 0): z-score of log(1 + x), skewness {logged:.2f}'
    )


def with_log_scale(sample: CsvSample, plan: ColumnPlan) -> ColumnPlan:
    """`plan` with `log: true` and its reason appended, for a `zscore` column whose values
    `log_reason` accepts; otherwise `plan` unchanged."""
    values = column_warnings.zscored_values(sample, plan)
    reason = None if values is None else log_reason(values)
    if reason is None:
        return plan
    return dataclasses.replace(
        plan, options={**plan.options, 'log': True}, reason=f'{plan.reason}; {reason}'
    )
