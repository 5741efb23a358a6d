"""How long `asynctrain init` proposes to train: a number of passes over the training rows
(epochs) by task, turned into steps of a batch size chosen by the data's size, under a cap on
steps that only very large inputs reach."""

from __future__ import annotations

import dataclasses
import math

from asynctrain.components.example_gen.csv_sample import CsvSample


@dataclasses.dataclass(frozen=True)
class TrainingPlan:
    """How long to train on data of this size.

    Attributes:
      batch_size: Examples per step per worker.
      train_steps: Optimizer steps over all workers.
      reason: How they were chosen.
    """

    batch_size: int
    train_steps: int
    reason: str


# Smaller batches for small data (more updates per epoch); about this many passes over the train
# split (2 of 3 rows with the default split). A class label gets 40 passes: on
# datasets/seattle_weather 20 (609 steps) reached eval accuracy 0.739 and 40 (1218) 0.752,
# HistGradientBoosting 0.768 on the same split (its README); Adagrad at 0.1 instead of the
# Trainer's 0.05 did not help (0.725 and 0.711). A regression label keeps 20: diabetes' eval RMSE
# went from 56.2 to 61.4 at 40 (HistGradientBoosting 55.6): it overfits sooner.
EPOCHS = {'binary': 40, 'multiclass': 40, 'regression': 20}
# A regression label with a long right tail (`label_skew`) trains as long as a class label: on
# datasets/diamonds (11 passes: 16% behind HistGradientBoosting; 43 passes 5.7%; 107 passes 2.0%)
# and datasets/txhousing (17 passes 13.4%, 33 passes 8.7%, 100 passes 10.5%) about 40 passes is
# where both are within 10%. 100 passes brought diamonds within 2.4% (543.7 and 541.6, its README)
# but the bundled taxi data's tips (skewness 3.40) to RMSE 1.2338 at 96 passes (the 15,000-step
# cap) against 1.0993 at 40, both with `fare`, `trip_miles` and `trip_seconds` on the log scale
# (HistGradientBoosting 0.9556): it overfits, so 40 stays.
LONG_TAIL_EPOCHS = 40
# The passes decide; the step count is only bounded. Below: a few hundred rows still get 100
# updates. Above: the most steps measured still improving, diamonds' 15,000 steps of 256 (107
# passes, 2.0% behind the reference), which 40 passes reach only at about 140,000 rows (a sample
# holds 100,000 by default). It was a fixed 1,500 steps for every label without a long tail:
# a 26,115-row regression then got about 6 of its 20 passes and scored RMSE 1.016, against
# 0.920 at 20 passes (issue 47; HistGradientBoosting 0.896); datasets/diamonds with `depth` as
# the label got 11 passes, RMSE 0.256 and 0.260, against 0.239 and 0.237 at 20 (its README).
# A class label on the bundled taxi data's 15,002 rows was cut from 40 passes (6,251 steps of
# 64) to 9.6.
MIN_STEPS, MAX_STEPS = 100, 15_000


def plan_training(
    sample: CsvSample, task: str = 'multiclass', long_tail: bool = False
) -> TrainingPlan:
    """Batch size and steps from the number of rows: about EPOCHS[task] passes over the train
    split (LONG_TAIL_EPOCHS for a regression label with a long right tail), between MIN_STEPS
    and MAX_STEPS steps."""
    rows = sample.rows
    batch_size = 256 if rows >= 50_000 else 64 if rows >= 2_000 else 32
    train_rows = rows * 2 // 3
    passes = LONG_TAIL_EPOCHS if long_tail and task == 'regression' else EPOCHS[task]
    wanted = math.ceil(passes * train_rows / batch_size)
    steps = min(MAX_STEPS, max(MIN_STEPS, wanted))
    of_rows = f'all {rows:,} rows' if sample.complete else f'the {rows:,} sampled rows'
    done = steps * batch_size / max(train_rows, 1)
    capped = f' (not {passes}: {wanted:,} steps are over the cap)' if wanted > MAX_STEPS else ''
    return TrainingPlan(
        batch_size,
        steps,
        f'{steps} steps of {batch_size}: about {done:.0f} passes{capped} over the '
        f'~{train_rows:,} training rows of {of_rows} '
        f'(bounded to {MIN_STEPS}-{MAX_STEPS} steps'
        + ('; the label has a long right tail' if passes != EPOCHS[task] else '')
        + ')',
    )
