"""The `datetime` transform in the generated preprocessing_fn: analyzed and transformed values on a
handful of in-memory rows (as `tft_unit.assertAnalyzeAndTransformResults` does), for text dates,
datetimes in a `strptime` format and epoch seconds; bad and missing values are filled and flagged.
"""

import math

import numpy as np
import pytest
import tensorflow_transform.beam as tft_beam
from tensorflow_metadata.proto.v0 import schema_pb2
from tensorflow_transform.tf_metadata import dataset_metadata

from asynctrain.components.transform import datetime_formats, preprocessing
from asynctrain.components.transform import feature_config as fc

# One pytest-xdist worker for the module: its module-scoped fixtures are built once.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.xdist_group('components.transform.datetime_transform_test'),
]

SCHEMA = schema_pb2.Schema()
for _name, _type in [('day', 'BYTES'), ('seen', 'BYTES'), ('ts', 'INT'), ('y', 'FLOAT')]:
    SCHEMA.feature.add(name=_name, type=schema_pb2.FeatureType.Value(_type))

CONFIG = fc.parse_feature_config(
    {
        'label': {'column': 'y', 'task': 'regression'},
        'features': [
            {'name': 'day', 'transform': 'datetime'},
            {
                'name': 'seen',
                'transform': 'datetime',
                'strptime': '%d.%m.%Y %H:%M',
                'parts': ['hour', 'minute', 'day_of_year'],
            },
            {'name': 'ts', 'transform': 'datetime'},
        ],
    },
    SCHEMA,
)

# Five rows: a Sunday, a Wednesday, 31 December, a date that does not exist, a missing value.
ROWS = [
    {'day': [b'2012/01/01'], 'seen': [b'01.01.2012 00:00'], 'ts': [0], 'y': [1.0]},
    {'day': [b'2014-03-05'], 'seen': [b'05.03.2014 08:15'], 'ts': [1_394_007_300], 'y': [2.0]},
    {'day': [b'2015-12-31'], 'seen': [b'31.12.2015 23:59'], 'ts': [-1], 'y': [3.0]},
    {'day': [b'2014-02-30'], 'seen': [b'2014-03-05 08:15'], 'ts': [], 'y': [4.0]},
    {'day': [], 'seen': [], 'ts': [86_400 * 366], 'y': [5.0]},
]


@pytest.fixture(scope='module')
def transformed(tmp_path_factory):
    metadata = dataset_metadata.DatasetMetadata(SCHEMA)
    with tft_beam.Context(temp_dir=str(tmp_path_factory.mktemp('tft')), force_tf_compat_v1=False):
        (rows, _), _ = (ROWS, metadata) | tft_beam.AnalyzeAndTransformDataset(
            preprocessing.build_preprocessing_fn(CONFIG)
        )
    return {key: np.array([row[key] for row in rows]) for key in rows[0]}


def test_a_date_gives_its_parts_as_features_named_after_it(transformed):
    values = transformed
    assert CONFIG.feature('day').parts == datetime_formats.DATE_PARTS
    assert set(values) == {*CONFIG.output_names, 'y'}
    assert set(CONFIG.feature('day').output_names) == {
        'day_year',
        'day_month',
        'day_day',
        'day_day_of_week',
        'day_day_of_year_sin',
        'day_day_of_year_cos',
        'day_missing',
    }
    # Months and days of the month as ids from 0 (the month 12 and the day 31 are missing).
    assert values['day_month'].tolist() == [0, 2, 11, 12, 12]
    assert values['day_day'].tolist() == [0, 4, 30, 31, 31]
    # Monday is 0: a Sunday, a Wednesday, a Thursday; 7 where missing.
    assert values['day_day_of_week'].tolist() == [6, 2, 3, 7, 7]
    assert values['day_missing'].tolist() == [0, 0, 0, 1, 1]


def test_the_year_is_standardized_over_the_dates_that_parse_and_filled_with_their_mean(
    transformed,
):
    values = transformed
    years = np.array([2012.0, 2014.0, 2015.0])
    expected = [*((years - years.mean()) / years.std()), 0.0, 0.0]
    np.testing.assert_allclose(values['day_year'], expected, rtol=1e-5, atol=1e-6)


def test_the_day_of_year_is_an_angle_so_31_december_is_next_to_1_january(transformed):
    values = transformed
    sin, cos = values['day_day_of_year_sin'], values['day_day_of_year_cos']
    angles = [2 * math.pi * (d - 1) / 365.25 for d in (1, 64, 365)]
    np.testing.assert_allclose(sin[:3], np.sin(angles), atol=1e-6)
    np.testing.assert_allclose(cos[:3], np.cos(angles), atol=1e-6)
    assert sin[3:].tolist() == cos[3:].tolist() == [0.0, 0.0]
    # 31 December is 1.25 days from 1 January on the circle (a year is 365.25 days); 5 March 63.
    near = 2 * math.pi * 1.25 / 365.25
    assert math.dist((sin[0], cos[0]), (sin[2], cos[2])) == pytest.approx(near, rel=0.01)
    assert math.dist((sin[0], cos[0]), (sin[1], cos[1])) > 1.0


def test_a_strptime_datetime_gives_hour_minute_and_a_numeric_day_of_year(transformed):
    values = transformed
    assert values['seen_hour'].tolist() == [0, 8, 23, 24, 24]
    assert values['seen_minute'].tolist() == [0, 15, 59, 60, 60]
    # An ISO value is not in this column's format: missing.
    assert values['seen_missing'].tolist() == [0, 0, 0, 1, 1]
    days = np.array([1.0, 64.0, 365.0])
    expected = [*((days - days.mean()) / days.std()), 0.0, 0.0]
    np.testing.assert_allclose(values['seen_day_of_year'], expected, rtol=1e-5, atol=1e-6)


def test_epoch_seconds_give_utc_parts_with_the_time_of_day(transformed):
    values = transformed
    assert CONFIG.feature('ts').parts == datetime_formats.DATE_PARTS + datetime_formats.TIME_PARTS
    # 1970-01-01 00:00, 2014-03-05 08:15, 1969-12-31 23:59, missing, 1971-01-02 00:00.
    assert values['ts_hour'].tolist() == [0, 8, 23, 24, 0]
    assert values['ts_minute'].tolist() == [0, 15, 59, 60, 0]
    assert values['ts_month'].tolist() == [0, 2, 11, 12, 0]
    assert values['ts_day'].tolist() == [0, 4, 30, 31, 1]
    assert values['ts_missing'].tolist() == [0, 0, 0, 1, 0]
