"""Small taxi-like frames, their TFDV statistics and a reviewed schema, shared by the
DriftValidator tests. Value shares are exact so that an L-infinity distance can be worked out by
hand: `payment_type` moves from Cash 50% / Credit Card 40% / Dispute 10% to 30% / 60% / 10%
(L-infinity 0.2), `pickup_area` from 1: 50% / 2: 50% to 1: 25% / 2: 75% (0.25)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import tensorflow_data_validation as tfdv
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2, statistics_pb2

ROWS = 200

SCHEMA = """
feature { name: "fare" type: FLOAT presence { min_fraction: 1.0 min_count: 1 } }
feature { name: "trip_start_hour" type: INT presence { min_count: 1 } }
feature {
  name: "payment_type" type: BYTES domain: "payment_type" presence { min_count: 1 }
}
feature {
  name: "pickup_area" type: INT int_domain { min: 1 max: 2 is_categorical: true }
  presence { min_count: 1 }
}
feature { name: "tips" type: FLOAT presence { min_count: 0 } }
string_domain { name: "payment_type" value: "Cash" value: "Credit Card" value: "Dispute" }
"""

PAYMENT_TYPE_L_INFINITY = 0.2
PICKUP_AREA_L_INFINITY = 0.25


def schema() -> schema_pb2.Schema:
    return text_format.Parse(SCHEMA, schema_pb2.Schema())


def _shares(values_and_shares: list[tuple[object, float]]) -> list[object]:
    column = []
    for value, share in values_and_shares:
        column += [value] * round(share * ROWS)
    return column


def baseline_frame() -> pd.DataFrame:
    """The data the served model was trained on."""
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {
            'fare': rng.normal(10.0, 2.0, ROWS),
            'trip_start_hour': rng.integers(0, 24, ROWS),
            'payment_type': _shares([('Cash', 0.5), ('Credit Card', 0.4), ('Dispute', 0.1)]),
            'pickup_area': _shares([(1, 0.5), (2, 0.5)]),
            'tips': rng.normal(1.0, 0.5, ROWS),
        }
    )


def drifted_frame() -> pd.DataFrame:
    """Today's data: fares up by one standard deviation, card payments and area 2 up."""
    rng = np.random.default_rng(1)
    return pd.DataFrame(
        {
            'fare': rng.normal(12.0, 2.0, ROWS),
            'trip_start_hour': rng.integers(0, 24, ROWS),
            'payment_type': _shares([('Cash', 0.3), ('Credit Card', 0.6), ('Dispute', 0.1)]),
            'pickup_area': _shares([(1, 0.25), (2, 0.75)]),
            'tips': rng.normal(1.0, 0.5, ROWS),
        }
    )


def statistics(
    frame: pd.DataFrame, with_schema: bool = False
) -> statistics_pb2.DatasetFeatureStatisticsList:
    """TFDV's statistics of `frame`; `with_schema` as StatisticsGen given the schema (value
    frequencies for the categorical int `pickup_area`), else as the pipeline's StatisticsGen."""
    options = tfdv.StatsOptions(schema=schema()) if with_schema else tfdv.StatsOptions()
    return tfdv.generate_statistics_from_dataframe(frame, stats_options=options)
