"""Which numeric columns `asynctrain init` proposes to z-score on a log scale (`log: true`): a
column with no negative value whose skewness is above MIN_SKEWNESS, a long right tail of counts,
sums of money or sizes.

Measured on `datasets/txhousing` (each figure a whole `asynctrain run`, eval RMSE in dollars;
HistGradientBoosting 8,597 on the same split; the dataset's README has the commands): `sales`,
`volume`, `listings` and `inventory` (skewness 3.81 to 4.30) z-scored as they are gave 9,385,
9,460 and 9,512 at 40 passes (9 to 11% behind the reference); z-scored as log(1 + x), 7,180 at
40 passes, 7,156 and 7,334 at init's 100 (15 to 17% ahead). The label, the median sale price, is
close to `volume / sales` (correlation 0.96): log(volume) - log(sales) is a difference a small
network forms, the ratio of two raw z-scores is not. On `datasets/seattle_weather`,
`precipitation` (skewness 3.50) on the log scale gave eval accuracy 0.7882 against 0.7515 and
0.7475 without (HistGradientBoosting 0.7678). On `datasets/diamonds`,
`carat`, `table`, `y` and `z` (skewness 0.80 to 2.43) on the log scale gave 575.6 against 565.2
and 569.1 without (HistGradientBoosting 530.9): no gain below a skewness of about 2, so
MIN_SKEWNESS leaves such columns as they are.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from asynctrain.components.example_gen.csv_sample import CsvSample
from asynctrain.components.shared.feature_types import ColumnType
from asynctrain.pipelines.init import label_skew
from asynctrain.pipelines.init.pipeline_draft import ColumnPlan

# A numeric column with no negative value and a skewness above this gets `log: true`.
MIN_SKEWNESS = 2.0


def log_reason(values: np.ndarray) -> str | None:
    """Why `values` (a column's present cells) are z-scored as log(1 + x), or None when they are
    not: a negative value, or a skewness at most MIN_SKEWNESS."""
    values = np.asarray(values, np.float64)
    values = values[np.isfinite(values)]
    if not len(values) or values.min() < 0:
        return None
    skew = label_skew.skewness(values)
    if skew <= MIN_SKEWNESS:
        return None
    logged = label_skew.skewness(np.log1p(values))
    return (
        f'a long right tail (skewness {skew:.2f} > {MIN_SKEWNESS}, no value below 0): '
        f'z-score of log(1 + x), skewness {logged:.2f}'
    )


def with_log_scale(sample: CsvSample, plan: ColumnPlan) -> ColumnPlan:
    """`plan` with `log: true` and its reason appended, for a `zscore` column whose values
    `log_reason` accepts; otherwise `plan` unchanged."""
    if plan.transform != 'zscore' or sample.types[plan.name] not in (
        ColumnType.INT,
        ColumnType.FLOAT,
    ):
        return plan
    present = sample.columns[plan.name].drop_null().to_numpy(zero_copy_only=False)
    reason = log_reason(present)
    if reason is None:
        return plan
    return dataclasses.replace(
        plan, options={**plan.options, 'log': True}, reason=f'{plan.reason}; {reason}'
    )
