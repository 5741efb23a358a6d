"""How `asynctrain init` trains a regression label with a long right tail (prices, counts): it
measures the label's skewness and, above MIN_SKEWNESS, proposes longer training
(`training_draft.LONG_TAIL_EPOCHS`); the loss stays the default `mse`, so the model is fit and served
in the label's own units.

Measured on `datasets/diamonds` (price, skewness 1.62; each figure a whole `asynctrain run`,
eval RMSE; HistGradientBoosting 530.9 on the same split; the dataset's README has the commands):
20 passes capped at 1,500 steps of 256 gave 615.3 (16% behind); `loss: msle` (trained on
log(1 + price), served in price's units) 715.7 at 1,500 steps and 594.4 at 6,000; `mse` at
6,000 steps 561.2, at 15,000 541.7. On `datasets/txhousing` (median price, skewness 0.84;
HistGradientBoosting 8,597): `mse` 9,752 at 1,500 steps of 64, 9,344 at 3,000, 9,504 at 8,959;
`msle` 9,704 at 1,500, 9,897 at 3,000. Longer training closed the gaps; the log did not (it fits
relative errors, and RMSE in the label's units weighs the expensive rows most), so `msle` stays
a loss a user may choose, not one init proposes."""

from __future__ import annotations

import dataclasses

import numpy as np

# A non-negative label whose skewness is above this has a long right tail.
MIN_SKEWNESS = 0.75


@dataclasses.dataclass(frozen=True)
class SkewPlan:
    """What the label's distribution asks of training.

    Attributes:
      skewness: The label's sample skewness.
      long_tail: Whether it is non-negative with a skewness above MIN_SKEWNESS.
      reason: The measurement, in words.
    """

    skewness: float
    long_tail: bool
    reason: str


def skewness(values: np.ndarray) -> float:
    """The sample skewness (Fisher-Pearson): 0 for a symmetric distribution, above 0 for a long
    right tail."""
    values = np.asarray(values, np.float64)
    if not len(values) or values.std() == 0:
        return 0.0
    return float(np.mean(((values - values.mean()) / values.std()) ** 3))


def plan_skew(labels: np.ndarray) -> SkewPlan:
    """A long right tail: non-negative values with a skewness above MIN_SKEWNESS."""
    labels = np.asarray(labels, np.float64)
    skew = skewness(labels)
    if len(labels) and labels.min() >= 0 and skew > MIN_SKEWNESS:
        return SkewPlan(skew, True, f'a long right tail (skewness {skew:.2f} > {MIN_SKEWNESS})')
    return SkewPlan(skew, False, f'skewness {skew:.2f}')
