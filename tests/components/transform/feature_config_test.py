"""The feature configuration: parsing, and errors that name the feature and field."""

import pytest
from tensorflow_metadata.proto.v0 import schema_pb2

from asynctrain.components.shared.yaml_config import ConfigError
from asynctrain.components.transform import datetime_formats
from asynctrain.components.transform import feature_config as fc
from asynctrain.pipelines.config import BUNDLED_SCHEMAS

TAXI = BUNDLED_SCHEMAS / 'taxi'


def _schema(**types) -> schema_pb2.Schema:
    schema = schema_pb2.Schema()
    for name, kind in types.items():
        schema.feature.add(name=name, type=schema_pb2.FeatureType.Value(kind))
    return schema


LABEL = {
    'name': 'label',
    'rule': 'greater_than_fraction',
    'value': 'tips',
    'reference': 'fare',
    'fraction': 0.2,
}
SCHEMA = _schema(tips='FLOAT', fare='FLOAT', city='BYTES', hour='INT')


def test_taxi_config_covers_every_transform_and_sizes_categoricals():
    config = fc.load_feature_config(str(TAXI / 'features.yaml'), str(TAXI / 'schema.pbtxt'))
    assert config.label.name == 'big_tipper'
    by_transform = {t: [f.name for f in config.features if f.transform == t] for t in fc.TRANSFORMS}
    assert by_transform['zscore'] == ['trip_miles', 'fare', 'trip_seconds']
    assert 'company' in by_transform['vocabulary']
    assert config.feature('trip_start_hour').cardinality == 25  # 24 hours + 1 out-of-range id
    assert config.feature('company').cardinality == 1010
    assert config.feature('pickup_latitude').cardinality == 10
    assert config.feature('fare').cardinality is None


@pytest.mark.parametrize(
    'feature, message',
    [
        ({'name': 'speed', 'transform': 'zscore'}, "features[0] (speed): unknown feature 'speed'"),
        (
            {'name': 'fare', 'transform': 'log'},
            "features[0] (fare): transform: unsupported transform 'log'",
        ),
        (
            {'name': 'city', 'transform': 'zscore'},
            "transform 'zscore' does not accept a BYTES feature",
        ),
        ({'name': 'fare', 'transform': 'identity'}, "transform 'identity' does not accept a FLOAT"),
        (
            {'name': 'fare', 'transform': 'zscore', 'fill': 'median'},
            'fill: expected "mean" or a number',
        ),
        (
            {'name': 'city', 'transform': 'vocabulary', 'top_k': 0},
            'top_k: expected a positive integer',
        ),
        (
            {'name': 'city', 'transform': 'vocabulary', 'oov_buckets': 0},
            'oov_buckets: expected an integer >= 1',
        ),
        (
            {'name': 'city', 'transform': 'vocabulary', 'frequency_threshold': -1},
            'frequency_threshold: expected an integer >= 0 (0: none)',
        ),
        (
            {'name': 'city', 'transform': 'hash', 'frequency_threshold': 5},
            "frequency_threshold: only for transform 'vocabulary', not 'hash'",
        ),
        (
            {'name': 'city', 'transform': 'vocabulary', 'topk': 3},
            "features[0].topk: unknown field; allowed: ['fill', 'frequency_threshold', 'log', "
            "'name',",
        ),
        (
            {'name': 'city', 'transform': 'vocabulary', 'log': True},
            "features[0] (city): log: only for transform 'zscore', not 'vocabulary'",
        ),
        (
            {'name': 'fare', 'transform': 'zscore', 'log': 'yes'},
            "features[0].log: expected bool, got 'yes'",
        ),
    ],
)
def test_bad_features_fail_naming_the_feature_and_field(feature, message):
    with pytest.raises(ConfigError) as error:
        fc.parse_feature_config({'label': LABEL, 'features': [feature]}, SCHEMA, 'f.yaml')
    assert message in str(error.value)
    assert str(error.value).startswith('f.yaml: ')


def test_bad_label_and_duplicates_are_rejected():
    feature = [{'name': 'fare', 'transform': 'zscore'}]
    with pytest.raises(ConfigError, match="label.rule: unsupported rule 'sum'"):
        fc.parse_feature_config({'label': dict(LABEL, rule='sum'), 'features': feature}, SCHEMA)
    with pytest.raises(ConfigError, match="label.value: 'city' is not a numeric"):
        fc.parse_feature_config({'label': dict(LABEL, value='city'), 'features': feature}, SCHEMA)
    with pytest.raises(ConfigError, match=r"listed more than once: \['fare'\]"):
        fc.parse_feature_config({'label': LABEL, 'features': feature * 2}, SCHEMA)


def test_missing_or_malformed_files_name_the_file(tmp_path):
    with pytest.raises(ConfigError, match='nope.yaml: cannot read'):
        fc.load_feature_config(str(tmp_path / 'nope.yaml'), str(TAXI / 'schema.pbtxt'))
    bad = tmp_path / 'bad.yaml'
    bad.write_text('label: [\n')
    with pytest.raises(ConfigError, match='bad.yaml: not valid YAML'):
        fc.load_feature_config(str(bad), str(TAXI / 'schema.pbtxt'))


LABEL_SCHEMA = _schema(
    **{'Species': 'BYTES', 'Body Mass (g)': 'FLOAT', 'Year': 'INT', 'Culmen Length (mm)': 'FLOAT'}
)
CULMEN = [{'name': 'Culmen Length (mm)', 'transform': 'zscore'}]


@pytest.mark.parametrize(
    'label, key, task, loss',
    [
        ({'column': 'Species', 'task': 'multiclass'}, 'Species', 'multiclass', 'mse'),
        ({'column': 'Species', 'task': 'binary', 'positive': 'Adelie'}, 'Species', 'binary', 'mse'),
        ({'column': 'Year', 'task': 'binary'}, 'Year', 'binary', 'mse'),
        (
            {'column': 'Body Mass (g)', 'task': 'regression', 'loss': 'huber'},
            'Body Mass (g)',
            'regression',
            'huber',
        ),
        (
            LABEL | {'value': 'Body Mass (g)', 'reference': 'Culmen Length (mm)'},
            'label',
            'binary',
            'mse',
        ),
    ],
)
def test_each_label_form_gives_its_key_and_task(label, key, task, loss):
    config = fc.parse_feature_config({'label': label, 'features': CULMEN}, LABEL_SCHEMA)
    assert (config.label.key, config.label.task, config.label.loss) == (key, task, loss)
    # The custom_config round trip keeps the form (a column label stays a column label).
    assert fc.from_dict(fc.to_dict(config)) == config


@pytest.mark.parametrize(
    'label, message',
    [
        (
            {'name': 'Species'},
            'f.yaml: label: expected {column: NAME, task: binary|multiclass|regression}',
        ),
        ({'column': 'Species'}, 'f.yaml: label.task: required field is missing'),
        (
            {'column': 'Species', 'task': 'ranking'},
            "label.task: got 'ranking'; allowed: ['binary',",
        ),
        (
            {'column': 'species', 'task': 'multiclass'},
            "label.column: 'species' is not in the schema",
        ),
        (
            {'column': 'Body Mass (g)', 'task': 'multiclass'},
            'label.column: a multiclass label must be a column of type INT or BYTES; '
            "'Body Mass (g)' is FLOAT",
        ),
        (
            {'column': 'Species', 'task': 'regression'},
            'label.column: a regression label must be a column of type INT or FLOAT',
        ),
        ({'column': 'Species', 'task': 'binary'}, "label.positive: 'Species' holds text"),
        (
            {'column': 'Year', 'task': 'binary', 'positive': '2007'},
            "label.positive: 'Year' is INT: expected an integer, got '2007'",
        ),
        (
            {'column': 'Species', 'task': 'multiclass', 'positive': 'Adelie'},
            'label.positive: only a binary label takes it, not multiclass',
        ),
        (
            {'column': 'Species', 'task': 'multiclass', 'loss': 'huber'},
            'label.loss: only a regression label takes a loss, not multiclass',
        ),
        (
            {'column': 'Body Mass (g)', 'task': 'regression', 'loss': 'mae'},
            "label.loss: got 'mae'; allowed: ['mse', 'huber', 'msle']",
        ),
        (
            {'column': 'Culmen Length (mm)', 'task': 'regression'},
            "label.column: 'Culmen Length (mm)' is also a feature: a label cannot be an input",
        ),
    ],
)
def test_bad_column_labels_fail_naming_the_file_and_field(label, message):
    with pytest.raises(ConfigError) as error:
        fc.parse_feature_config({'label': label, 'features': CULMEN}, LABEL_SCHEMA, 'f.yaml')
    assert message in str(error.value)


def test_with_a_preprocessing_module_label_and_features_are_optional(tmp_path):
    config = fc.parse_feature_config({}, LABEL_SCHEMA, with_module=True)
    assert config == fc.FeatureConfig(label=None, features=())
    missing = fc.load_feature_config(
        str(tmp_path / 'features.yaml'), str(TAXI / 'schema.pbtxt'), with_module=True
    )
    assert missing == fc.FeatureConfig(label=None, features=())
    with pytest.raises(ConfigError, match='f.yaml: expected top-level keys "label"'):
        fc.parse_feature_config({'features': CULMEN}, LABEL_SCHEMA, 'f.yaml')


def test_a_bad_schema_names_its_file(tmp_path):
    schema = tmp_path / 'schema.pbtxt'
    schema.write_text('feature { nam: "x" }\n')
    with pytest.raises(ConfigError, match='schema.pbtxt: not a valid Schema text proto'):
        fc.load_feature_config(str(TAXI / 'features.yaml'), str(schema))


DATED = _schema(day='BYTES', ts='INT', day_year='FLOAT', y='FLOAT')


@pytest.mark.parametrize(
    'feature, message',
    [
        (
            {'name': 'day', 'transform': 'datetime', 'parts': ['year', 'season']},
            "features[0] (day): parts: unknown part 'season'; allowed: ['year', 'month',",
        ),
        (
            {'name': 'ts', 'transform': 'datetime', 'strptime': '%Y-%m-%d'},
            'features[0] (ts): strptime: only a text (BYTES) column takes a format',
        ),
        (
            {'name': 'day', 'transform': 'datetime', 'strptime': '%Y-%m'},
            "features[0] (day): strptime: '%Y-%m': needs a year (%Y or %y), a month (%m) and a day",
        ),
        (
            {'name': 'day', 'transform': 'datetime', 'strptime': '%Y-%m-%d %I'},
            "strptime: '%Y-%m-%d %I': unsupported directive %I; allowed: %Y %y %m %d %H %M %S",
        ),
        (
            {'name': 'ts', 'transform': 'datetime', 'unit': 'days'},
            "features[0] (ts): unit: got 'days'; allowed: ['seconds', 'milliseconds']",
        ),
        (
            {'name': 'day', 'transform': 'datetime', 'parts': ['year']},
            "features[0] (day): its transformed feature 'day_year' is also a column of the schema",
        ),
        (
            {'name': 'y', 'transform': 'zscore', 'parts': ['year']},
            'features[0] (y): parts: only a datetime feature takes it',
        ),
    ],
)
def test_bad_datetime_features_fail_naming_the_feature_and_field(feature, message):
    label = {'column': 'y', 'task': 'regression'} if feature['name'] != 'y' else None
    data = {'label': label or {'column': 'day_year', 'task': 'regression'}, 'features': [feature]}
    with pytest.raises(ConfigError) as error:
        fc.parse_feature_config(data, DATED, 'f.yaml')
    assert message in str(error.value)


def test_a_datetime_feature_lists_its_parts_and_its_outputs():
    config = fc.parse_feature_config(
        {
            'label': {'column': 'y', 'task': 'regression'},
            'features': [
                {'name': 'day', 'transform': 'datetime', 'parts': ['month', 'day_of_week']},
                {'name': 'ts', 'transform': 'datetime'},
            ],
        },
        DATED,
    )
    assert config.feature('day').output_names == ('day_month', 'day_day_of_week', 'day_missing')
    # A number is an instant: its default parts have the time of day.
    assert config.feature('ts').parts == (
        *datetime_formats.DATE_PARTS,
        *datetime_formats.TIME_PARTS,
    )
    assert 'ts_day_of_year_sin' in config.output_names
    assert config.names == ('day', 'ts')
    assert fc.from_dict(fc.to_dict(config)) == config
