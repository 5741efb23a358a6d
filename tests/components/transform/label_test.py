"""The label of each task through the generated preprocessing_fn: analyzed and transformed values.

One `AnalyzeAndTransformDataset` run on seven hand-made rows with four column labels at once
(binary with a positive value, binary 0/1, multiclass, regression), the columns named with
spaces and parentheses as real CSVs name them. The multiclass vocabulary file is read back from
the transform graph.
"""

import os

import numpy as np
import pytest
import tensorflow_transform.beam as tft_beam
from tensorflow_metadata.proto.v0 import schema_pb2
from tensorflow_transform.tf_metadata import dataset_metadata

from asynctrain.components.transform import feature_config as fc
from asynctrain.components.transform import preprocessing

# One pytest-xdist worker for the module: its module-scoped fixtures are built once.
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group('components.transform.label_test')]

SPECIES = 'Species (common name)'
SEX = 'Sex'
SURVIVED = 'survived'
MASS = 'Body Mass (g)'

SCHEMA = schema_pb2.Schema()
for _name, _type in [
    (SPECIES, 'BYTES'),
    (SEX, 'BYTES'),
    (SURVIVED, 'INT'),
    (MASS, 'FLOAT'),
    ('Culmen Length (mm)', 'FLOAT'),
]:
    SCHEMA.feature.add(name=_name, type=schema_pb2.FeatureType.Value(_type))

FEATURES = ({'name': 'Culmen Length (mm)', 'transform': 'zscore'},)
LABELS = {
    SPECIES: {'column': SPECIES, 'task': 'multiclass'},
    SEX: {'column': SEX, 'task': 'binary', 'positive': 'FEMALE'},
    SURVIVED: {'column': SURVIVED, 'task': 'binary'},
    MASS: {'column': MASS, 'task': 'regression'},
}

ADELIE, GENTOO, CHINSTRAP = b'Adelie Penguin (Pygoscelis adeliae)', b'Gentoo penguin', b'Chinstrap'
# Seven rows; [] is a missing value (a serving example without its label).
ROWS = [
    {SPECIES: [ADELIE], SEX: [b'FEMALE'], SURVIVED: [1], MASS: [3750.0]},
    {SPECIES: [GENTOO], SEX: [b'MALE'], SURVIVED: [0], MASS: [5400.5]},
    {SPECIES: [ADELIE], SEX: [b'MALE'], SURVIVED: [0], MASS: [3800.25]},
    {SPECIES: [CHINSTRAP], SEX: [b'FEMALE'], SURVIVED: [1], MASS: [3500.0]},
    {SPECIES: [ADELIE], SEX: [b'female'], SURVIVED: [1], MASS: [3450.0]},
    {SPECIES: [GENTOO], SEX: [b'MALE'], SURVIVED: [0], MASS: [5100.0]},
    {SPECIES: [], SEX: [], SURVIVED: [], MASS: []},
]
for _i, _row in enumerate(ROWS):
    _row['Culmen Length (mm)'] = [float(_i)]


def _analyze_and_transform(preprocessing_fn, temp_dir) -> tuple[list, schema_pb2.Schema, str]:
    with tft_beam.Context(temp_dir=str(temp_dir), force_tf_compat_v1=False):
        (rows, metadata), transform_fn = (
            ROWS,
            dataset_metadata.DatasetMetadata(SCHEMA),
        ) | tft_beam.AnalyzeAndTransformDataset(preprocessing_fn)
    return rows, metadata.schema, transform_fn[0][0]


@pytest.fixture(scope='module')
def multiclass(tmp_path_factory):
    """The generated preprocessing_fn of a features.yaml whose label is the species column."""
    config = fc.parse_feature_config({'label': LABELS[SPECIES], 'features': list(FEATURES)}, SCHEMA)
    return _analyze_and_transform(
        preprocessing.build_preprocessing_fn(config), tmp_path_factory.mktemp('tft')
    )


@pytest.fixture(scope='module')
def labels(tmp_path_factory):
    """Every other label form at once, through `transform_label`, each under its own key."""
    forms = {key: fc.build_label(label) for key, label in LABELS.items() if key != SPECIES}
    forms['survived_is_zero'] = fc.build_label(
        {'column': SURVIVED, 'task': 'binary', 'positive': 0}
    )

    def preprocessing_fn(inputs):
        return {key: preprocessing.transform_label(inputs, label) for key, label in forms.items()}

    rows, schema, _ = _analyze_and_transform(preprocessing_fn, tmp_path_factory.mktemp('tft'))
    types = {f.name: schema_pb2.FeatureType.Name(f.type) for f in schema.feature}
    return {key: [row[key] for row in rows] for key in forms}, types


def test_multiclass_ids_follow_the_vocabulary_written_as_label_classes(multiclass):
    rows, schema, transform_dir = multiclass
    with open(os.path.join(transform_dir, 'assets', preprocessing.LABEL_VOCABULARY), 'rb') as f:
        classes = f.read().splitlines()
    # By frequency on the analyzed rows: Adelie 3, Gentoo 2, Chinstrap 1; the missing label adds
    # no class.
    assert classes == [ADELIE, GENTOO, CHINSTRAP]
    ids = [row[SPECIES] for row in rows]
    assert ids == [0, 1, 0, 2, 0, 1, -1]
    assert {f.name: f.type for f in schema.feature}[SPECIES] == schema_pb2.INT
    assert rows[0]['Culmen Length (mm)'] == pytest.approx(-3 / np.std(range(7)), rel=1e-5)


def test_binary_positive_value_is_one_every_other_value_zero_missing_minus_one(labels):
    values, types = labels
    # Exact match: 'female' is not the positive value 'FEMALE'.
    assert values[SEX] == [1, 0, 0, 1, 0, 0, -1]
    assert types[SEX] == 'INT'


def test_binary_zero_one_column_is_kept_as_is(labels):
    values, _ = labels
    assert values[SURVIVED] == [1, 0, 0, 1, 1, 0, -1]


def test_binary_int_column_with_an_int_positive_value(labels):
    values, _ = labels
    assert values['survived_is_zero'] == [0, 1, 1, 0, 0, 1, -1]


def test_regression_label_passes_through_in_its_units_as_float32(labels):
    values, types = labels
    assert types[MASS] == 'FLOAT'
    np.testing.assert_array_equal(
        np.float32(values[MASS][:6]), np.float32([3750.0, 5400.5, 3800.25, 3500.0, 3450.0, 5100.0])
    )
    assert np.isnan(values[MASS][6])
