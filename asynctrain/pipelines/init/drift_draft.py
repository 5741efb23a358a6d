"""`asynctrain init`'s drift section: how much the user's own data varies when nothing changed,
measured with the comparators the pipeline uses, and the per-feature thresholds that follow.

Two measurements on the CSV sample, each between two halves of it, with DriftValidator's own
comparison (`asynctrain.components.drift_validator.comparison`, TFDV's comparators):

- the first half against the second, in file order, as consecutive days would arrive: it shows a
  feature that moves over time (taxi pickup places move from one day to the next);
- two halves drawn at random: sampling noise alone at half the sample's size.

A feature whose larger distance exceeds half its default threshold gets its own threshold, twice
that distance (at most `MAX_PROPOSED`, so that a unit change, near 1.0, still stops a run). When
the label itself differs between the file-order halves far more than between the random ones,
the rows are ordered (sorted by the label, say): the file-order measurement then says nothing of
days, and only the random halves are used; the config says so.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from tensorflow_metadata.proto.v0 import schema_pb2

from asynctrain.components.drift_validator import comparison
from asynctrain.components.example_gen.csv_sample import CsvSample
from asynctrain.pipelines.config import DriftSettings
from asynctrain.pipelines.init import sample_statistics

# Fewer rows than this per half and the distances are mostly noise: the defaults are proposed.
MIN_ROWS_PER_HALF = 100
MAX_PROPOSED = 0.9
# The label is "ordered" when its file-order distance exceeds the random one by this much.
ORDERED_MARGIN = 0.2


@dataclasses.dataclass(frozen=True)
class DriftPlan:
    """The proposed drift section.

    Attributes:
      features: Feature -> (proposed threshold, why), for features that vary more than half
        their default when nothing changed.
      reason: How the thresholds were measured (or why they were not).
    """

    features: dict[str, tuple[float, str]]
    reason: str


def _statistics(sample: CsvSample, schema: schema_pb2.Schema, rows: np.ndarray):
    names = [f.name for f in schema.feature if f.name in sample.columns]
    return sample_statistics.statistics(sample, names, rows)


def _distances(
    sample, schema, first: np.ndarray, second: np.ndarray
) -> dict[str, tuple[float, str]]:
    """Feature -> (distance, comparator) between the rows `first` and the rows `second`."""
    loose = comparison.Thresholds(numeric=1.0, categorical=1.0)
    result = comparison.compare(
        _statistics(sample, schema, second), _statistics(sample, schema, first), schema, loose
    )
    return {drift.feature: (drift.distance or 0.0, drift.comparator) for drift in result.compared}


def _round_up(value: float) -> float:
    return min(MAX_PROPOSED, math.ceil(value * 20) / 20)


def plan_drift(sample: CsvSample, schema: schema_pb2.Schema, label: str | None) -> DriftPlan:
    """Per-feature thresholds for the features of `schema` that vary on their own in `sample`."""
    half = sample.rows // 2
    if half < MIN_ROWS_PER_HALF:
        return DriftPlan(
            {},
            f'{sample.rows} rows: too few to measure how the data varies; the defaults apply',
        )
    ordered = np.arange(2 * half)
    shuffled = np.random.default_rng(0).permutation(sample.rows)[: 2 * half]
    in_order = _distances(sample, schema, ordered[:half], ordered[half:])
    at_random = _distances(sample, schema, shuffled[:half], shuffled[half:])
    how = f'the first and second halves of {2 * half:,} sampled rows, and two random halves'
    if (
        label
        and label in in_order
        and label in at_random
        and (in_order[label][0] > at_random[label][0] + ORDERED_MARGIN)
    ):
        in_order = {}
        how = (
            f'two random halves of {2 * half:,} sampled rows (the rows are ordered: the label '
            "differs between the file's halves, so file order says nothing of days)"
        )
    defaults = DriftSettings()
    features = {}
    for feature in sorted(set(in_order) | set(at_random)):
        measured, comparator = max(m for m in (in_order.get(feature), at_random.get(feature)) if m)
        default = (
            defaults.numeric_threshold
            if comparator == comparison.JENSEN_SHANNON
            else defaults.categorical_threshold
        )
        if measured > default / 2:
            features[feature] = (
                _round_up(2 * measured),
                f'varies by {measured:.2f} between halves of unchanged data (default {default})',
            )
    return DriftPlan(features, f'measured between {how}')
