"""`asynctrain init`'s drift section: how much the user's own data varies when nothing changed,
measured with the comparators the pipeline uses, and the per-feature thresholds that follow.

Two measurements on the CSV sample, each between two halves of it, with DriftValidator's own
comparison (`asynctrain.components.drift_validator.comparison`, TFDV's comparators):

- the first half against the second, in file order, as consecutive days would arrive: it shows a
  feature that moves over time (taxi pickup places move from one day to the next);
- random halves, chosen by each row's content (not its place in the file), RANDOM_SPLITS times:
  sampling noise alone at half the sample's size, averaged.

A feature's distance is the random halves' one, or the file-order one where that exceeds it by
more than ORDERED_MARGIN (below that, file order is one more random split, and the proposal
would depend on the order of the rows). A feature whose distance exceeds half its default
threshold gets its own threshold, twice that distance (at most `MAX_PROPOSED`, so that a unit
change, near 1.0, still stops a run). When the label itself differs between the file-order
halves far more than between the random ones, or the rows are sorted or grouped by a column that
is not a time (a city, a key), file order says nothing of days: only the random halves are used,
and the config says so. So a sorted file and a shuffled copy of it get the same proposal.
"""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tensorflow_metadata.proto.v0 import schema_pb2

from asynctrain.components.drift_validator import comparison, thresholds
from asynctrain.components.example_gen.csv_sample import CsvSample
from asynctrain.pipelines.config import DriftSettings
from asynctrain.pipelines.init import sample_statistics, wording

# Fewer rows than this per half and the distances are mostly noise: the defaults are proposed.
MIN_ROWS_PER_HALF = 100
MAX_PROPOSED = 0.9
# The label is "ordered" when its file-order distance exceeds the random one by this much.
ORDERED_MARGIN = 0.2
# Random halves measured this many times (the mean is kept): one split's distance is noisy.
RANDOM_SPLITS = 4
# Columns whose order is the order rows arrive in: sorted by one, a file's halves are earlier and
# later data.
TIME_NAME = re.compile(
    r'(time|date|year|month|week|day|hour|epoch|(^|_)ts$|_at$|(^|_)id$)', re.IGNORECASE
)


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
    loose = thresholds.Thresholds(numeric=1.0, categorical=1.0)
    result = comparison.compare(
        _statistics(sample, schema, second), _statistics(sample, schema, first), schema, loose
    )
    return {drift.feature: (drift.distance or 0.0, drift.comparator) for drift in result.compared}


def _round_up(value: float) -> float:
    return min(MAX_PROPOSED, math.ceil(value * 20) / 20)


def _random_orders(sample: CsvSample, count: int) -> list[np.ndarray]:
    """`count` orders of the sample's row indices that depend on each row's cells (and a salt),
    not on where the row is in the file: two halves of one are random halves, the same for a
    file and a shuffled copy of it. The k-th copy of a row is hashed with k, so that copies are
    spread too."""
    import pandas as pd

    table = pa.table({name: sample.columns[name] for name in sample.names})
    rows = pd.util.hash_pandas_object(table.to_pandas(), index=False)
    copy = rows.groupby(rows.to_numpy()).cumcount().to_numpy(np.uint64)
    keys = rows.to_numpy() ^ (copy * np.uint64(0x9E3779B97F4A7C15))
    return [
        np.argsort(
            pd.util.hash_array(keys ^ np.uint64((salt + 1) * 0xBF58476D1CE4E5B9 % (1 << 64))),
            kind='stable',
        )
        for salt in range(count)
    ]


def _random_distances(sample, schema, half: int) -> dict[str, tuple[float, str]]:
    """Feature -> (mean distance, comparator) over RANDOM_SPLITS pairs of random halves."""
    measured: dict[str, list[float]] = {}
    comparators = {}
    for order in _random_orders(sample, RANDOM_SPLITS):
        for feature, (distance, comparator) in _distances(
            sample, schema, order[:half], order[half : 2 * half]
        ).items():
            measured.setdefault(feature, []).append(distance)
            comparators[feature] = comparator
    return {feature: (float(np.mean(d)), comparators[feature]) for feature, d in measured.items()}


def grouped_by(sample: CsvSample) -> str | None:
    """A column the rows are sorted (or grouped) by, each of its values in one run of
    consecutive rows; None when there is none. Dates, times and ids do not count: rows in that
    order are rows in the order they came."""
    for name in sample.names:
        if TIME_NAME.search(name):
            continue
        present = sample.columns[name].drop_null()
        if len(present) < 2 * MIN_ROWS_PER_HALF:
            continue
        values = present.to_numpy(zero_copy_only=False)
        changes = int((values[1:] != values[:-1]).sum())
        distinct = len(pc.unique(present))
        if 2 <= distinct <= len(present) // 2 and changes == distinct - 1:
            return name
    return None


def plan_drift(sample: CsvSample, schema: schema_pb2.Schema, label: str | None) -> DriftPlan:
    """Per-feature thresholds for the features of `schema` that vary on their own in `sample`."""
    half = sample.rows // 2
    if half < MIN_ROWS_PER_HALF:
        return DriftPlan(
            {},
            f'{wording.rows(sample.rows)}: too few to measure how the data varies; the defaults '
            'apply',
        )
    ordered = np.arange(2 * half)
    in_order = _distances(sample, schema, ordered[:half], ordered[half:])
    at_random = _random_distances(sample, schema, half)
    # An odd count leaves one row out of the halves; the count said is the rows read.
    left_out = '; one row in neither half' if sample.rows % 2 else ''
    how = (
        f'the first and second halves of {sample.rows:,} sampled rows, and random halves '
        f'({RANDOM_SPLITS} splits{left_out})'
    )
    random_only = (
        f'random halves of {sample.rows:,} sampled rows ({RANDOM_SPLITS} splits{left_out}; the '
        'rows are ordered: {}, so file order says nothing of days)'
    )
    if (
        label
        and label in in_order
        and label in at_random
        and (in_order[label][0] > at_random[label][0] + ORDERED_MARGIN)
    ):
        in_order = {}
        how = random_only.format("the label differs between the file's halves")
    elif column := grouped_by(sample):
        in_order = {}
        how = random_only.format(f'sorted or grouped by {column!r}')
    defaults = DriftSettings()
    features = {}
    for feature in sorted(set(in_order) | set(at_random)):
        # The file-order halves count where they differ beyond what random halves do: a feature
        # that moves over the file. Otherwise they are two more random halves, and using them
        # would make the proposal depend on the order of the rows.
        measured, comparator = at_random.get(feature) or in_order[feature]
        if feature in in_order and in_order[feature][0] > measured + ORDERED_MARGIN:
            measured, comparator = in_order[feature]
        default = (
            defaults.numeric_threshold
            if comparator == thresholds.JENSEN_SHANNON
            else defaults.categorical_threshold
        )
        if measured > default / 2:
            features[feature] = (
                _round_up(2 * measured),
                f'varies by {measured:.2f} between halves of unchanged data (default {default})',
            )
    return DriftPlan(features, f'measured between {how}')
