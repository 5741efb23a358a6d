"""On the bundled taxi CSV, our examples equal stock CsvExampleGen's, split by split."""

import collections
import glob
import os

import pytest
import tensorflow as tf
import tfx
from tfx.components.example_gen import utils
from tfx.components.example_gen.csv_example_gen import executor as stock_executor
from tfx.proto import example_gen_pb2
from tfx.types import standard_artifacts
from tfx.utils import proto_utils

from asynctrain.components.example_gen import component, executor, spec

# One pytest-xdist worker for the module: its module-scoped fixtures are built once.
pytestmark = pytest.mark.xdist_group('components.example_gen.equivalence_test')

TAXI_DIR = os.path.join(
    os.path.dirname(tfx.__file__), 'examples', 'chicago_taxi_pipeline', 'data', 'simple'
)
SCHEMA = os.path.join(
    os.path.dirname(__file__), '..', '..', '..', 'asynctrain', 'schemas', 'taxi', 'schema.pbtxt'
)


def examples_by_split(uri):
    """Multiset of each split's examples, canonicalized by deterministic serialization."""
    result = {}
    for split in ('train', 'eval'):
        counter = collections.Counter()
        for path in glob.glob(os.path.join(uri, f'Split-{split}', '*.gz')):
            for record in tf.data.TFRecordDataset(
                path, compression_type='GZIP'
            ).as_numpy_iterator():
                counter[
                    tf.train.Example.FromString(record).SerializeToString(deterministic=True)
                ] += 1
        result[split] = counter
    return result


@pytest.fixture(scope='module')
def stock_output(tmp_path_factory):
    examples = standard_artifacts.Examples()
    examples.uri = str(tmp_path_factory.mktemp('stock'))
    input_config = utils.make_default_input_config()
    stock_executor.Executor().Do(
        {},
        {'examples': [examples]},
        {
            'input_base': TAXI_DIR,
            'input_config': proto_utils.proto_to_json(input_config),
            'output_config': proto_utils.proto_to_json(
                utils.make_default_output_config(input_config)
            ),
            'output_data_format': example_gen_pb2.FORMAT_TF_EXAMPLE,
            'output_file_format': example_gen_pb2.FORMAT_TFRECORDS_GZIP,
        },
    )
    return examples_by_split(examples.uri)


@pytest.mark.integration
@pytest.mark.parametrize('schema_path', [SCHEMA, None], ids=['schema', 'inferred'])
def test_same_examples_per_split_as_stock(stock_output, schema_path, tmp_path):
    props = dict(
        component.CsvExampleGen(
            input_base=TAXI_DIR,
            schema_path=schema_path,
        ).exec_properties
    )
    props = {
        k: proto_utils.proto_to_json(v) if hasattr(v, 'DESCRIPTOR') else v for k, v in props.items()
    }
    examples = standard_artifacts.Examples()
    examples.uri = str(tmp_path)
    executor.Executor().Do({}, {spec.EXAMPLES_KEY: [examples]}, props)
    ours = examples_by_split(examples.uri)
    assert sum(stock_output['train'].values()) + sum(stock_output['eval'].values()) == 15002
    for split in ('train', 'eval'):
        assert ours[split] == stock_output[split], split
    assert examples.get_int_custom_property('rows_written_train') == sum(ours['train'].values())
