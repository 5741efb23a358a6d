"""Drift between today's data statistics and those the served model was trained on, feature by
feature, measured by TFDV's own drift comparators. No TFX here: TFDV and its protos only.

What TFDV reports, as measured with TFDV 1.16 (`tests/components/drift_validator/`):

- `validate_statistics(..., previous_statistics=...)` records a distance for every feature that
  has a `drift_comparator` and values on both sides, under the threshold or over it, in
  `Anomalies.drift_skew_info` (`drift_measurements`: type, value, threshold). A feature over its
  threshold (strictly) also gets an `anomaly_info` entry whose reason is
  `COMPARATOR_L_INFTY_HIGH` or `COMPARATOR_JENSEN_SHANNON_DIVERGENCE_HIGH`. So `compared` below
  holds real distances for every compared feature, not only for the drifted ones.
- A feature with no values on one side gets no distance that means anything: missing from the
  previous statistics, TFDV reports `COMPARATOR_CONTROL_DATA_MISSING`; listed there with no
  values, nothing (numeric) or an L-infinity distance to an empty distribution (categorical);
  absent today, nothing at all unless the schema requires the feature (then
  `SCHEMA_MISSING_COLUMN`, ExampleValidator's business). This module therefore decides presence
  itself (see `compare`).
- L-infinity reads the value frequencies (`string_stats`). StatisticsGen computes those for an
  int feature only when it is given the schema; without it the int feature has numeric
  statistics alone and TFDV returns an L-infinity distance of 0.0 whatever the data. Such a
  feature is compared with Jensen-Shannon on its histogram instead (`comparator_for`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import tensorflow_data_validation as tfdv
from tensorflow_data_validation.utils import schema_util
from tensorflow_metadata.proto.v0 import anomalies_pb2, schema_pb2, statistics_pb2

from asynctrain.components.drift_validator.thresholds import (
    JENSEN_SHANNON,
    L_INFINITY,
    Thresholds,
    check_features,
)

# Drift.absent_from: the side on which a compared feature has no values.
ABSENT_FROM_PREVIOUS = 'previous'  # it appeared today
ABSENT_FROM_CURRENT = 'current'  # it disappeared today

_MEASUREMENT_COMPARATORS = {
    anomalies_pb2.DriftSkewInfo.Measurement.L_INFTY: L_INFINITY,
    anomalies_pb2.DriftSkewInfo.Measurement.JENSEN_SHANNON_DIVERGENCE: JENSEN_SHANNON,
}
_DISTANCE_REASONS = frozenset(
    {
        anomalies_pb2.AnomalyInfo.COMPARATOR_L_INFTY_HIGH,
        anomalies_pb2.AnomalyInfo.COMPARATOR_JENSEN_SHANNON_DIVERGENCE_HIGH,
    }
)


@dataclasses.dataclass(frozen=True)
class Drift:
    """One feature's comparison with the previous statistics.

    Attributes:
      feature: The feature's name in the schema.
      comparator: `JENSEN_SHANNON` or `L_INFINITY`.
      distance: TFDV's measured distance; None when the feature has no values on one side
        (`absent_from`), where TFDV measures nothing meaningful.
      threshold: The threshold it was held to.
      absent_from: '' when measured on both sides; `ABSENT_FROM_PREVIOUS` when the feature
        appeared today, `ABSENT_FROM_CURRENT` when it disappeared.
    """

    feature: str
    comparator: str
    distance: float | None
    threshold: float
    absent_from: str = ''


@dataclasses.dataclass(frozen=True)
class Comparison:
    """The outcome of `compare`.

    Attributes:
      drifts: The features that drifted, sorted by name: over their threshold, appeared or
        disappeared.
      compared: Every feature measured on both sides, drifted or not, sorted by name.
      appeared: Schema features with values today and none in the previous statistics.
      disappeared: Schema features with values in the previous statistics and none today.
      anomalies: TFDV's Anomalies as it returned them: drift, and the schema anomalies too
        (ExampleValidator's to judge; kept so the artifact shows TFDV's whole view).
      first_run: True when there were no previous statistics: no drift, schema alone.
    """

    drifts: tuple[Drift, ...]
    compared: tuple[Drift, ...]
    appeared: tuple[str, ...]
    disappeared: tuple[str, ...]
    anomalies: anomalies_pb2.Anomalies
    first_run: bool


def _present(
    statistics: statistics_pb2.DatasetFeatureStatisticsList,
) -> dict[str, statistics_pb2.FeatureNameStatistics]:
    """The default slice's top-level features that have at least one value, by name."""
    view = tfdv.DatasetListView(statistics).get_default_slice_or_die()
    present = {}
    for path in view.list_features():
        feature = view.get_feature(path)
        common = feature.common_statistics()
        if len(path.steps()) == 1 and common is not None and common.num_non_missing > 0:
            present[path.steps()[0]] = feature.proto()
    return present


def comparator_for(
    feature: schema_pb2.Feature, statistics: Sequence[statistics_pb2.FeatureNameStatistics]
) -> str | None:
    """The comparator TFDV's rule gives `feature`, or None for a feature TFDV has no comparator
    for (bytes, structs).

    Categorical features (`schema_util.is_categorical_feature`: strings, ints with a categorical
    int domain, a bool or a natural-language domain) get L-infinity, the rest Jensen-Shannon. A
    categorical feature whose `statistics` hold no value frequencies (`string_stats`) on every
    side where it has values gets Jensen-Shannon: there L-infinity would read 0.0 regardless.
    """
    kinds = {feature_statistics.WhichOneof('stats') for feature_statistics in statistics}
    if not kinds or not kinds <= {'num_stats', 'string_stats'}:
        return None
    if schema_util.is_categorical_feature(feature) and kinds == {'string_stats'}:
        return L_INFINITY
    return JENSEN_SHANNON


def drift_schema(
    schema: schema_pb2.Schema, comparators: Mapping[str, tuple[str, float]]
) -> schema_pb2.Schema:
    """A copy of `schema` in which each feature of `comparators` (name: (comparator, threshold))
    has that drift comparator, replacing any the schema had."""
    copy = schema_pb2.Schema()
    copy.CopyFrom(schema)
    for feature in copy.feature:
        if feature.name not in comparators:
            continue
        comparator, threshold = comparators[feature.name]
        feature.ClearField('drift_comparator')
        if comparator == L_INFINITY:
            feature.drift_comparator.infinity_norm.threshold = threshold
        else:
            divergence = feature.drift_comparator.jensen_shannon_divergence
            divergence.threshold = threshold
            divergence.source.type = schema_pb2.HistogramSelection.QUANTILES
    return copy


def compare(
    statistics: statistics_pb2.DatasetFeatureStatisticsList,
    previous_statistics: statistics_pb2.DatasetFeatureStatisticsList | None,
    schema: schema_pb2.Schema,
    thresholds: Thresholds,
) -> Comparison:
    """Compares `statistics` with `previous_statistics`, feature by feature, with TFDV.

    The features compared are the schema's top-level features that have values in either
    statistics; a feature outside the schema is ExampleValidator's (`SCHEMA_NEW_COLUMN`), and
    the label is compared like any other feature (a changed class balance is drift too).

    A schema feature with values on one side only counts as drift, with no distance:
    - disappeared (values in the previous data, none today): a feed that dropped a column; the
      served model was trained on values the new data no longer has.
    - appeared (none in the previous data, values today): the served model never saw it, so its
      training data tell nothing about today's. This is the case on the first run after the
      schema gains a feature; accept it for that run.

    With `previous_statistics` None (first run) nothing is compared: `first_run` is True, there
    are no drifts, and `anomalies` is TFDV's validation against the schema alone.

    Raises:
      ValueError: `thresholds.features` names a feature the schema lacks.
    """
    check_features(thresholds, schema)
    if previous_statistics is None:
        anomalies = tfdv.validate_statistics(statistics, schema)
        return Comparison((), (), (), (), anomalies, first_run=True)

    current, previous = _present(statistics), _present(previous_statistics)
    comparators = {}
    for feature in schema.feature:
        sides = [side[feature.name] for side in (current, previous) if feature.name in side]
        comparator = comparator_for(feature, sides)
        if comparator is not None:
            threshold = thresholds.for_feature(feature.name, comparator)
            comparators[feature.name] = (comparator, threshold)
    anomalies = tfdv.validate_statistics(
        statistics, drift_schema(schema, comparators), previous_statistics=previous_statistics
    )

    measured = {}
    for info in anomalies.drift_skew_info:
        for measurement in info.drift_measurements:
            if measurement.type in _MEASUREMENT_COMPARATORS:
                measured['.'.join(info.path.step)] = measurement
    over = {
        '.'.join(info.path.step)
        for info in anomalies.anomaly_info.values()
        if any(reason.type in _DISTANCE_REASONS for reason in info.reason)
    }

    drifts, compared, appeared, disappeared = [], [], [], []
    for name, (comparator, threshold) in sorted(comparators.items()):
        if name not in previous or name not in current:
            absent_from = ABSENT_FROM_PREVIOUS if name not in previous else ABSENT_FROM_CURRENT
            (appeared if name not in previous else disappeared).append(name)
            drifts.append(Drift(name, comparator, None, threshold, absent_from))
            continue
        if name not in measured:
            continue
        measurement = measured[name]
        drift = Drift(
            name,
            _MEASUREMENT_COMPARATORS[measurement.type],
            measurement.value,
            measurement.threshold,
        )
        compared.append(drift)
        if name in over:
            drifts.append(drift)
    return Comparison(
        tuple(drifts), tuple(compared), tuple(appeared), tuple(disappeared), anomalies, False
    )
