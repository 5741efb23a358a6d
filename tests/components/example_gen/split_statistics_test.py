"""The ExampleGen's statistics equal stock StatisticsGen's over the examples it wrote."""

import os
import shutil

import tfx
from google.protobuf import json_format
from tfx.components.statistics_gen import executor as statistics_gen_executor
from tfx.types import artifact_utils, standard_artifacts, standard_component_specs
from tfx.utils import proto_utils

from asynctrain.components.example_gen import component, executor, spec, split_statistics
from tests import nested_values

REPO = os.path.join(os.path.dirname(__file__), '..', '..', '..')
FIXTURES = os.path.join(REPO, 'tests', 'data', 'csv')
TAXI_CSV = os.path.join(
    os.path.dirname(tfx.__file__), 'examples', 'chicago_taxi_pipeline', 'data', 'simple'
)
TAXI_SCHEMA = os.path.join(REPO, 'asynctrain', 'schemas', 'taxi', 'schema.pbtxt')


def _exec_properties(input_base, **kwargs):
    props = dict(component.CsvExampleGen(input_base=input_base, **kwargs).exec_properties)
    return {
        k: proto_utils.proto_to_json(v) if hasattr(v, 'DESCRIPTOR') else v for k, v in props.items()
    }


def _example_gen(input_base, output_dir, **kwargs):
    examples = standard_artifacts.Examples()
    examples.uri = os.path.join(output_dir, 'examples')
    statistics = standard_artifacts.ExampleStatistics()
    statistics.uri = os.path.join(output_dir, 'statistics')
    executor.Executor().Do(
        {},
        {spec.EXAMPLES_KEY: [examples], spec.STATISTICS_KEY: [statistics]},
        _exec_properties(input_base, **kwargs),
    )
    return examples, statistics


def _statistics_gen(examples, output_dir):
    statistics = standard_artifacts.ExampleStatistics()
    statistics.uri = output_dir
    statistics_gen_executor.Executor().Do(
        {standard_component_specs.EXAMPLES_KEY: [examples]},
        {standard_component_specs.STATISTICS_KEY: [statistics]},
        {standard_component_specs.EXCLUDE_SPLITS_KEY: '[]'},
    )
    return statistics


def _by_feature(artifact, split):
    from tensorflow_data_validation.utils import stats_util

    stats = stats_util.load_stats_binary(
        os.path.join(artifact_utils.get_split_uri([artifact], split), 'FeatureStats.pb')
    )
    (dataset,) = stats.datasets
    features = {f.path.step[0]: json_format.MessageToDict(f) for f in dataset.features}
    return dataset.num_examples, features


def _assert_close(ours, stock, where=''):
    """Equal, floats within a relative 1e-5 (the order in which rows are summed differs)."""
    nested_values.assert_close(ours, stock, where, rel=1e-5, abs_=1e-9)


def _assert_same_statistics(ours, stock, splits):
    assert artifact_utils.decode_split_names(ours.split_names) == splits
    for split in splits:
        ours_count, ours_features = _by_feature(ours, split)
        stock_count, stock_features = _by_feature(stock, split)
        assert ours_count == stock_count > 0
        _assert_close(ours_features, stock_features, split)


def test_taxi_statistics_equal_statistics_gen_over_the_written_examples(tmp_path):
    examples, statistics = _example_gen(TAXI_CSV, str(tmp_path), schema_path=TAXI_SCHEMA)
    stock = _statistics_gen(examples, str(tmp_path / 'stock'))
    _assert_same_statistics(statistics, stock, ['train', 'eval'])
    assert statistics.span == examples.span
    assert statistics.get_json_value_custom_property(spec.SAMPLE_RATE_BY_SPLIT_PROPERTY) == {
        'train': 1.0,
        'eval': 1.0,
    }
    _, features = _by_feature(statistics, 'train')
    assert len(features) == 18  # Every taxi column, the float, int and string ones.


def test_missing_cells_and_inferred_types_equal_statistics_gen(tmp_path):
    """Without a schema, with empty cells (features without values) and a column empty
    everywhere (features of no type)."""
    input_dir = tmp_path / 'input'
    input_dir.mkdir()
    shutil.copy(os.path.join(FIXTURES, 'empty_cells.csv'), input_dir)
    with open(os.path.join(FIXTURES, 'empty_cells.csv')) as f:
        lines = f.read().splitlines()
    (input_dir / 'empty_cells.csv').write_text(
        '\n'.join([lines[0] + ',nothing'] + [line + ',' for line in lines[1:]]) + '\n'
    )
    examples, statistics = _example_gen(str(input_dir), str(tmp_path))
    stock = _statistics_gen(examples, str(tmp_path / 'stock'))
    splits = artifact_utils.decode_split_names(examples.split_names)
    for split in splits:
        if _by_feature(stock, split)[0]:
            ours_count, ours_features = _by_feature(statistics, split)
            stock_count, stock_features = _by_feature(stock, split)
            assert ours_count == stock_count
            _assert_close(ours_features, stock_features, split)
            assert ours_features['nothing']['stringStats']['commonStats'] == {
                'numMissing': str(ours_count)
            }
    assert sum(_by_feature(statistics, s)[0] for s in splits) == 3


def test_the_statistics_file_is_where_statistics_gen_writes_it():
    assert split_statistics.split_path('/s', 'train') == os.path.join(
        '/s', 'Split-train', statistics_gen_executor.DEFAULT_FILE_NAME
    )
