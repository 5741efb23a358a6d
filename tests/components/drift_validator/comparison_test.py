"""`comparison.compare` on statistics TFDV computed from small frames: the distances it reports,
thresholds just either side of them, appeared and disappeared features, the first run."""

from __future__ import annotations

import pytest
from tensorflow_metadata.proto.v0 import anomalies_pb2

from asynctrain.components.drift_validator import comparison
from asynctrain.components.drift_validator.thresholds import (
    DEFAULT_CATEGORICAL_THRESHOLD,
    DEFAULT_NUMERIC_THRESHOLD,
    JENSEN_SHANNON,
    L_INFINITY,
    Thresholds,
    check_features,
)
from tests.components.drift_validator import drift_testdata as data

# Tiny thresholds: every distance above zero counts, so every measured one is reported.
TINY = Thresholds(numeric=1e-9, categorical=1e-9)


@pytest.fixture(scope='module')
def baseline():
    return data.statistics(data.baseline_frame())


@pytest.fixture(scope='module')
def drifted():
    return data.statistics(data.drifted_frame())


@pytest.fixture(scope='module')
def measured(drifted, baseline):
    """Each feature's distance, measured once with tiny thresholds."""
    result = comparison.compare(drifted, baseline, data.schema(), TINY)
    return {drift.feature: drift for drift in result.compared}


def _drifted(result: comparison.Comparison) -> list[str]:
    return [drift.feature for drift in result.drifts]


def test_every_compared_feature_has_its_distance_drifted_or_not(drifted, baseline, measured):
    result = comparison.compare(drifted, baseline, data.schema(), Thresholds())

    assert {drift.feature: drift.comparator for drift in result.compared} == {
        'fare': JENSEN_SHANNON,
        'payment_type': L_INFINITY,
        # A categorical int whose statistics hold no value frequencies: L-infinity would read 0.
        'pickup_area': JENSEN_SHANNON,
        'tips': JENSEN_SHANNON,
        'trip_start_hour': JENSEN_SHANNON,
    }
    assert [drift.distance for drift in result.compared] == [
        measured[drift.feature].distance for drift in result.compared
    ]
    assert result.compared[3].threshold == DEFAULT_NUMERIC_THRESHOLD
    assert measured['payment_type'].distance == pytest.approx(data.PAYMENT_TYPE_L_INFINITY)
    # One standard deviation of shift in the fares is far; the unchanged tips are near.
    assert measured['fare'].distance > 0.1 > measured['tips'].distance > 0
    assert _drifted(result) == ['fare', 'payment_type']
    assert result.appeared == result.disappeared == ()
    assert not result.first_run


def test_the_same_data_has_no_distance(baseline):
    result = comparison.compare(baseline, baseline, data.schema(), TINY)

    assert [drift.distance for drift in result.compared] == [0.0] * 5
    assert result.drifts == ()


@pytest.mark.parametrize('feature', ['fare', 'payment_type'])
def test_a_threshold_just_over_the_distance_passes_and_just_under_drifts(
    drifted, baseline, measured, feature
):
    distance = measured[feature].distance
    kind = 'numeric' if measured[feature].comparator == JENSEN_SHANNON else 'categorical'

    over = comparison.compare(
        drifted,
        baseline,
        data.schema(),
        Thresholds(**{'numeric': 1, 'categorical': 1, kind: distance * 1.01}),
    )
    under = comparison.compare(
        drifted,
        baseline,
        data.schema(),
        Thresholds(**{'numeric': 1, 'categorical': 1, kind: distance * 0.99}),
    )

    assert _drifted(over) == []
    assert _drifted(under) == [feature]
    (drift,) = under.drifts
    assert drift.distance == distance
    assert drift.threshold == pytest.approx(distance * 0.99)
    # TFDV's own verdict, kept in the anomalies proto.
    (reason,) = under.anomalies.anomaly_info[feature].reason
    assert reason.type == (
        anomalies_pb2.AnomalyInfo.COMPARATOR_JENSEN_SHANNON_DIVERGENCE_HIGH
        if kind == 'numeric'
        else anomalies_pb2.AnomalyInfo.COMPARATOR_L_INFTY_HIGH
    )


def test_a_feature_threshold_overrides_the_default(drifted, baseline, measured):
    fare = measured['fare'].distance
    loose = Thresholds(numeric=1.0, categorical=1.0, features={'fare': fare * 0.99})
    tight = Thresholds(numeric=fare * 0.99, categorical=1.0, features={'fare': fare * 1.01})

    assert _drifted(comparison.compare(drifted, baseline, data.schema(), loose)) == ['fare']
    tight_result = comparison.compare(drifted, baseline, data.schema(), tight)
    assert 'fare' not in _drifted(tight_result)
    assert [d.threshold for d in tight_result.compared if d.feature == 'fare'] == [
        pytest.approx(fare * 1.01)
    ]


def test_a_categorical_int_is_compared_by_l_infinity_when_its_values_were_counted(baseline):
    schema = data.schema()
    result = comparison.compare(
        data.statistics(data.drifted_frame(), with_schema=True),
        data.statistics(data.baseline_frame(), with_schema=True),
        schema,
        Thresholds(),
    )

    (pickup_area,) = [drift for drift in result.compared if drift.feature == 'pickup_area']
    assert pickup_area.comparator == L_INFINITY
    assert pickup_area.distance == pytest.approx(data.PICKUP_AREA_L_INFINITY)
    assert pickup_area.threshold == DEFAULT_CATEGORICAL_THRESHOLD
    assert 'pickup_area' in _drifted(result)


def test_appeared_and_disappeared_features_count_as_drift_without_a_distance(baseline):
    today = data.baseline_frame().drop(columns=['tips'])
    before = data.baseline_frame().drop(columns=['trip_start_hour'])

    result = comparison.compare(
        data.statistics(today), data.statistics(before), data.schema(), Thresholds()
    )

    assert result.appeared == ('trip_start_hour',)
    assert result.disappeared == ('tips',)
    assert result.drifts == (
        comparison.Drift('tips', JENSEN_SHANNON, None, 0.1, comparison.ABSENT_FROM_CURRENT),
        comparison.Drift(
            'trip_start_hour', JENSEN_SHANNON, None, 0.1, comparison.ABSENT_FROM_PREVIOUS
        ),
    )
    assert [drift.feature for drift in result.compared] == ['fare', 'payment_type', 'pickup_area']
    # What TFDV says itself: the appeared feature lacks control data; of the disappeared one,
    # optional in the schema, it says nothing.
    assert [r.type for r in result.anomalies.anomaly_info['trip_start_hour'].reason] == [
        anomalies_pb2.AnomalyInfo.COMPARATOR_CONTROL_DATA_MISSING
    ]
    assert 'tips' not in result.anomalies.anomaly_info


def test_a_feature_without_values_counts_as_absent(baseline):
    # Listed in the statistics of both sides, with no values in the served model's data.
    before = data.baseline_frame().assign(trip_start_hour=None, tips=None)

    result = comparison.compare(baseline, data.statistics(before), data.schema(), Thresholds())

    assert result.appeared == ('tips', 'trip_start_hour')
    assert [(d.feature, d.distance) for d in result.drifts] == [
        ('tips', None),
        ('trip_start_hour', None),
    ]
    # TFDV finds no histogram to compare there, and reports nothing.
    assert 'tips' not in result.anomalies.anomaly_info
    assert 'trip_start_hour' not in result.anomalies.anomaly_info


def test_the_first_run_is_judged_on_the_schema_alone(drifted):
    today = data.drifted_frame().assign(payment_type=['Cash'] * 199 + ['Voucher'])

    result = comparison.compare(data.statistics(today), None, data.schema(), TINY)

    assert result.first_run
    assert result.drifts == result.compared == result.appeared == result.disappeared == ()
    assert len(result.anomalies.drift_skew_info) == 0
    # The schema anomaly is TFDV's, kept; it is not drift.
    assert [r.type for r in result.anomalies.anomaly_info['payment_type'].reason] == [
        anomalies_pb2.AnomalyInfo.ENUM_TYPE_UNEXPECTED_STRING_VALUES
    ]


def test_schema_anomalies_are_kept_but_not_taken_for_drift(baseline):
    today = data.baseline_frame().assign(payment_type=['Cash'] * 199 + ['Voucher'])

    result = comparison.compare(data.statistics(today), baseline, data.schema(), Thresholds())

    assert _drifted(result) == ['payment_type']
    reasons = {r.type for r in result.anomalies.anomaly_info['payment_type'].reason}
    assert reasons == {
        anomalies_pb2.AnomalyInfo.ENUM_TYPE_UNEXPECTED_STRING_VALUES,
        anomalies_pb2.AnomalyInfo.COMPARATOR_L_INFTY_HIGH,
    }


def test_a_feature_threshold_must_name_a_schema_feature(drifted, baseline):
    thresholds = Thresholds(features={'fares': 0.2})

    with pytest.raises(ValueError, match=r"'fares', not in the schema; its features are: fare, "):
        check_features(thresholds, data.schema())
    with pytest.raises(ValueError, match="'fares'"):
        comparison.compare(drifted, baseline, data.schema(), thresholds)


@pytest.mark.parametrize(
    'fields, message',
    [
        ({'numeric': 0}, r'numeric: expected a threshold in \(0, 1\], got 0'),
        ({'categorical': 1.5}, r'categorical: expected a threshold in \(0, 1\], got 1.5'),
        ({'numeric': 'high'}, r"numeric: expected a number in \(0, 1\], got 'high'"),
        ({'features': {'fare': -0.1}}, r"features\['fare'\]: expected a threshold"),
        ({'features': ['fare']}, r'features: expected a mapping'),
    ],
)
def test_thresholds_name_the_field_that_is_wrong(fields, message):
    with pytest.raises(ValueError, match=message):
        Thresholds(**fields)
