"""The generated preprocessing_fn: analyzed and transformed values on a handful of rows.

In the manner of tensorflow-transform's `assertAnalyzeAndTransformResults`: the rows go through
`AnalyzeAndTransformDataset` with Beam, and each output value is checked against what the
analyzers must have computed (mean/std, vocabulary with OOV, buckets, label).
"""

import math

import numpy as np
import pytest
import tensorflow_transform.beam as tft_beam
from tensorflow_metadata.proto.v0 import schema_pb2
from tensorflow_transform.tf_metadata import dataset_metadata

from asynctrain.components.transform import feature_config as fc
from asynctrain.components.transform import preprocessing

# One pytest-xdist worker for the module: its module-scoped fixtures are built once.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.xdist_group('components.transform.preprocessing_test'),
]

SCHEMA = schema_pb2.Schema()
for _name, _type in [
    ('miles', 'FLOAT'),
    ('fare', 'FLOAT'),
    ('tips', 'FLOAT'),
    ('payment', 'BYTES'),
    ('tract', 'INT'),
    ('hour', 'INT'),
    ('lat', 'FLOAT'),
    ('user', 'BYTES'),
]:
    _f = SCHEMA.feature.add(name=_name, type=schema_pb2.FeatureType.Value(_type))
    _f.value_count.min = 1
    _f.value_count.max = 1

CONFIG = fc.parse_feature_config(
    {
        'label': {
            'name': 'big_tipper',
            'rule': 'greater_than_fraction',
            'value': 'tips',
            'reference': 'fare',
            'fraction': 0.2,
        },
        'features': [
            {'name': 'miles', 'transform': 'zscore', 'fill': 'mean'},
            {'name': 'fare', 'transform': 'zscore', 'fill': 100.0},
            {'name': 'payment', 'transform': 'vocabulary', 'top_k': 2, 'oov_buckets': 1},
            {'name': 'tract', 'transform': 'vocabulary', 'top_k': 10, 'oov_buckets': 1},
            {'name': 'hour', 'transform': 'identity', 'num_buckets': 24},
            {'name': 'lat', 'transform': 'bucketize', 'num_buckets': 2},
            {'name': 'user', 'transform': 'hash', 'num_buckets': 1000},
        ],
    },
    SCHEMA,
)

# Six rows; [] is a missing feature (an empty CSV cell).
ROWS = [
    dict(
        miles=[1.0],
        fare=[10.0],
        tips=[3.0],
        payment=[b'Cash'],
        tract=[7],
        hour=[0],
        lat=[1.0],
        user=[b'ann'],
    ),
    dict(
        miles=[2.0],
        fare=[10.0],
        tips=[1.0],
        payment=[b'Cash'],
        tract=[7],
        hour=[23],
        lat=[2.0],
        user=[b'bob'],
    ),
    dict(
        miles=[3.0],
        fare=[],
        tips=[],
        payment=[b'Card'],
        tract=[8],
        hour=[24],
        lat=[3.0],
        user=[b'ann'],
    ),
    dict(
        miles=[], fare=[20.0], tips=[5.0], payment=[b'Cash'], tract=[], hour=[], lat=[4.0], user=[]
    ),
    dict(
        miles=[4.0],
        fare=[20.0],
        tips=[4.0],
        payment=[b'Card'],
        tract=[8],
        hour=[5],
        lat=[],
        user=[b'cy'],
    ),
    dict(
        miles=[5.0],
        fare=[30.0],
        tips=[0.0],
        payment=[b'Other'],
        tract=[9],
        hour=[-1],
        lat=[6.0],
        user=[b'dee'],
    ),
]


@pytest.fixture(scope='module')
def transformed(tmp_path_factory):
    metadata = dataset_metadata.DatasetMetadata(SCHEMA)
    temp_dir = str(tmp_path_factory.mktemp('tft'))
    with tft_beam.Context(temp_dir=temp_dir, force_tf_compat_v1=False):
        (rows, _), _ = (ROWS, metadata) | tft_beam.AnalyzeAndTransformDataset(
            preprocessing.build_preprocessing_fn(CONFIG)
        )
    return {key: np.array([row[key] for row in rows]) for key in rows[0]}


def test_zscore_uses_present_values_and_fills_missing_with_the_mean(transformed):
    present = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    mean, std = present.mean(), present.std()
    expected = (
        [(v - mean) / std for v in [1.0, 2.0, 3.0]] + [0.0] + [(v - mean) / std for v in [4.0, 5.0]]
    )
    np.testing.assert_allclose(transformed['miles'], expected, rtol=1e-5)


def test_zscore_fills_missing_with_a_configured_constant(transformed):
    present = np.array([10.0, 10.0, 20.0, 20.0, 30.0])
    mean, std = present.mean(), present.std()
    np.testing.assert_allclose(transformed['fare'][2], (100.0 - mean) / std, rtol=1e-5)
    np.testing.assert_allclose(transformed['fare'][5], (30.0 - mean) / std, rtol=1e-5)


def test_vocabulary_ids_by_frequency_with_oov_for_rare_and_missing(transformed):
    # top_k=2 keeps Cash (3 rows) then Card (2); Other is out of vocabulary -> id 2.
    assert transformed['payment'].tolist() == [0, 0, 1, 0, 1, 2]
    # Integer categorical: 7 and 8 twice, 9 once -> ids 0..2 by frequency; missing -> OOV id 3.
    ids = transformed['tract'].tolist()
    assert ids[0] == ids[1] and ids[2] == ids[4] and {ids[0], ids[2]} == {0, 1}
    assert ids[5] == 2
    assert ids[3] == 3


def test_identity_keeps_in_range_ids_and_maps_the_rest_to_num_buckets(transformed):
    assert transformed['hour'].tolist() == [0, 23, 24, 24, 5, 24]


def test_bucketize_splits_at_the_median_and_fills_missing_with_the_mean(transformed):
    buckets = transformed['lat'].tolist()
    assert buckets[0] == buckets[1] == 0
    assert buckets[3] == buckets[5] == 1
    mean = np.mean([1.0, 2.0, 3.0, 4.0, 6.0])
    assert buckets[4] == (0 if mean < 3.0 else 1)
    assert set(buckets) == {0, 1}


def test_hash_gives_a_string_its_fingerprint_bucket_and_missing_its_own_id(transformed):
    import tensorflow as tf

    expected = tf.strings.to_hash_bucket_fast(['ann', 'bob', 'cy', 'dee'], 1000).numpy().tolist()
    ann, bob, cy, dee = expected
    assert transformed['user'].tolist() == [ann, bob, ann, 1000, cy, dee]


def test_label_is_tip_above_a_fifth_of_the_fare_with_missing_as_zero(transformed):
    # 3 > 2 -> 1; 1 > 2 -> 0; 0 > 0 -> 0 (both missing); 5 > 4 -> 1; 4 > 4 -> 0; 0 > 6 -> 0.
    assert transformed['big_tipper'].tolist() == [1, 0, 0, 1, 0, 0]


def test_every_output_is_a_finite_scalar_per_row(transformed):
    for name, values in transformed.items():
        assert values.shape == (len(ROWS),), name
        assert all(math.isfinite(float(v)) for v in values), name


def _analyze_and_transform(config: fc.FeatureConfig, schema, rows, temp_dir: str) -> dict:
    metadata = dataset_metadata.DatasetMetadata(schema)
    with tft_beam.Context(temp_dir=temp_dir, force_tf_compat_v1=False):
        (out, _), _ = (rows, metadata) | tft_beam.AnalyzeAndTransformDataset(
            preprocessing.build_preprocessing_fn(config)
        )
    return {key: np.array([row[key] for row in out]) for key in out[0]}


def test_zscore_with_log_standardizes_log1p_of_the_values(tmp_path):
    schema = schema_pb2.Schema()
    for name in ('sales', 'volume', 'price'):
        schema.feature.add(name=name, type=schema_pb2.FLOAT)
    config = fc.parse_feature_config(
        {
            'label': {'column': 'price', 'task': 'regression'},
            'features': [
                {'name': 'sales', 'transform': 'zscore', 'fill': 'mean', 'log': True},
                {'name': 'volume', 'transform': 'zscore', 'fill': 99.0, 'log': True},
            ],
        },
        schema,
    )
    # Counts and sums of money over three orders of magnitude; row 3 misses both; row 4 holds a
    # negative count, which serving may meet though the train split has none here.
    sales = [6.0, 60.0, 600.0, None, -3.0, 1000.0]
    volume = [1e3, 2e4, 5e5, None, 7.0, 9e5]
    rows = [
        {
            'sales': [] if s is None else [s],
            'volume': [] if v is None else [v],
            'price': [1.0],
        }
        for s, v in zip(sales, volume)
    ]
    out = _analyze_and_transform(config, schema, rows, str(tmp_path))

    def signed_log1p(x):
        return np.sign(x) * np.log1p(np.abs(x))

    logged = signed_log1p(np.array([s for s in sales if s is not None]))
    mean, std = logged.mean(), logged.std()
    expected = [(signed_log1p(s) - mean) / std if s is not None else 0.0 for s in sales]
    np.testing.assert_allclose(out['sales'], expected, rtol=1e-5, atol=1e-6)
    # -3 gives -log(4): below every non-negative value, finite.
    assert out['sales'][4] == pytest.approx((-math.log(4.0) - mean) / std, rel=1e-5)
    logged = np.log1p([v for v in volume if v is not None])
    mean, std = logged.mean(), logged.std()
    # A numeric fill is in the column's units, logged as the values are.
    assert out['volume'][3] == pytest.approx((math.log1p(99.0) - mean) / std, rel=1e-5)
    assert out['volume'][5] == pytest.approx((math.log1p(9e5) - mean) / std, rel=1e-5)
