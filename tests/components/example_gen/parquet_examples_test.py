"""The ExampleGen's `parquet_examples` hold the rows of its `examples` exactly as TFXIO decodes
them, and stock Transform analyzing them writes the graph it writes from the examples."""

import glob
import os
import shutil

import pyarrow.parquet as pq
import pytest
import tensorflow as tf
import tfx
from tfx.components.util import examples_utils
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils, standard_artifacts
from tfx.utils import proto_utils
from tfx_bsl.coders import example_coder

from asynctrain.components.example_gen import component, decoded_columns, executor, spec
from asynctrain.components.shared import feature_types
from asynctrain.components.transform import feature_config as fc
from asynctrain.testing import transform_runs as runs

# One pytest-xdist worker for the module: its module-scoped fixtures are built once.
pytestmark = pytest.mark.xdist_group('components.example_gen.parquet_examples_test')

REPO = os.path.join(os.path.dirname(__file__), '..', '..', '..')
FIXTURES = os.path.join(REPO, 'tests', 'data', 'csv')
TAXI_CSV = os.path.join(
    os.path.dirname(tfx.__file__), 'examples', 'chicago_taxi_pipeline', 'data', 'simple'
)


def _example_gen(input_base, output_dir, **kwargs):
    props = {
        k: proto_utils.proto_to_json(v) if hasattr(v, 'DESCRIPTOR') else v
        for k, v in component.CsvExampleGen(input_base=input_base, **kwargs).exec_properties.items()
    }
    examples = standard_artifacts.Examples()
    examples.uri = os.path.join(output_dir, 'examples')
    parquet_examples = standard_artifacts.Examples()
    parquet_examples.uri = os.path.join(output_dir, 'parquet_examples')
    executor.Executor().Do(
        {}, {spec.EXAMPLES_KEY: [examples], spec.PARQUET_EXAMPLES_KEY: [parquet_examples]}, props
    )
    return examples, parquet_examples


def _files(artifact, split, suffix):
    return sorted(glob.glob(os.path.join(artifact_utils.get_split_uri([artifact], split), suffix)))


def _assert_same_rows(examples, parquet_examples, schema=None):
    """File by file (both are named by the chunk they hold): the Parquet table equals the
    examples decoded by tfx_bsl, as Transform's TFXIO decodes them (typed by the schema when
    there is one, else by what the examples hold)."""
    decoder = example_coder.ExamplesToRecordBatchDecoder(
        schema.SerializeToString() if schema else None
    )
    rows = 0
    for split in artifact_utils.decode_split_names(examples.split_names):
        tfrecords = _files(examples, split, '*.gz')
        parquet = _files(parquet_examples, split, '*.parquet')
        assert [os.path.basename(p).split('-', 1)[1][: -len('.gz')] for p in tfrecords] == [
            os.path.basename(p).split('-', 1)[1][: -len('.parquet')] for p in parquet
        ]
        for tfrecord_path, parquet_path in zip(tfrecords, parquet):
            records = list(
                tf.data.TFRecordDataset(tfrecord_path, compression_type='GZIP').as_numpy_iterator()
            )
            decoded = decoder.DecodeBatch(records)
            table = pq.read_table(parquet_path)
            assert pq.ParquetFile(parquet_path).num_row_groups == 1
            assert sorted(table.column_names) == sorted(decoded.schema.names)
            for name in table.column_names:
                ours, theirs = table.column(name).combine_chunks(), decoded.column(name)
                assert ours.type == theirs.type, name
                assert ours.to_pylist() == theirs.to_pylist(), name
            rows += table.num_rows
        assert parquet_examples.get_int_custom_property(
            spec.ROWS_WRITTEN_SPLIT_PROPERTY_PREFIX + split
        ) == examples.get_int_custom_property(spec.ROWS_WRITTEN_SPLIT_PROPERTY_PREFIX + split)
    assert rows == examples.get_int_custom_property(spec.ROWS_WRITTEN_PROPERTY) > 0
    assert parquet_examples.split_names == examples.split_names
    assert parquet_examples.span == examples.span
    assert examples_utils.get_payload_format(parquet_examples) == (
        example_gen_pb2.PayloadFormat.FORMAT_PARQUET
    )
    assert examples_utils.get_file_format(parquet_examples) == decoded_columns.PARQUET_FILE_FORMAT


@pytest.fixture(scope='module')
def taxi(tmp_path_factory):
    output_dir = str(tmp_path_factory.mktemp('taxi'))
    return output_dir, _example_gen(TAXI_CSV, output_dir, schema_path=str(runs.TAXI_SCHEMA))


def test_taxi_parquet_rows_equal_the_decoded_examples(taxi):
    _, (examples, parquet_examples) = taxi
    _assert_same_rows(examples, parquet_examples, feature_types.load_schema(str(runs.TAXI_SCHEMA)))


def test_missing_cells_and_an_untyped_column_equal_the_decoded_examples(tmp_path):
    """Without a schema, with empty cells (features without values) and a column empty
    everywhere (a feature of no type: a null column on both sides)."""
    input_dir = tmp_path / 'input'
    input_dir.mkdir()
    with open(os.path.join(FIXTURES, 'empty_cells.csv')) as f:
        lines = f.read().splitlines()
    (input_dir / 'empty_cells.csv').write_text(
        '\n'.join([lines[0] + ',nothing'] + [line + ',' for line in lines[1:]]) + '\n'
    )
    examples, parquet_examples = _example_gen(str(input_dir), str(tmp_path))
    _assert_same_rows(examples, parquet_examples)


def test_the_copy_is_an_output_only_when_asked_for():
    """A user of the component alone gets stock ExampleGen's outputs; the pipeline asks."""
    assert spec.PARQUET_EXAMPLES_KEY not in component.CsvExampleGen(input_base=FIXTURES).outputs
    asked = component.CsvExampleGen(input_base=FIXTURES, parquet_copy=True).outputs
    assert asked[spec.PARQUET_EXAMPLES_KEY].type_name == 'Examples'


def test_a_spans_copy_carries_its_span_version_and_input_fingerprint(tmp_path):
    """A reader that finds the Parquet copy (the pipeline's Transform, its run summary) sees
    the span the examples were read from, as the driver records it on `examples`."""
    for span, name in ((3, 'crlf.csv'), (4, 'empty_cells.csv')):
        directory = tmp_path / 'input' / f'span-{span}'
        directory.mkdir(parents=True)
        shutil.copy(os.path.join(FIXTURES, name), directory / 'data.csv')
    examples, parquet_examples = _example_gen(
        str(tmp_path / 'input'),
        str(tmp_path),
        input_config=example_gen_pb2.Input(
            splits=[example_gen_pb2.Input.Split(name='single_split', pattern='span-{SPAN}/*')]
        ),
    )
    _assert_same_rows(examples, parquet_examples)
    assert examples.get_int_custom_property('span') == 4
    for key in ('span', 'version', 'input_fingerprint'):
        assert examples.has_custom_property(key) == (key != 'version'), key
        if examples.has_custom_property(key):
            assert parquet_examples.get_custom_property(key) == examples.get_custom_property(key)


@pytest.mark.integration
def test_transform_analyzing_the_parquet_writes_the_graph_of_the_examples(taxi):
    """Stock Transform, the pipeline's settings and the taxi feature config (z-scores,
    vocabularies, buckets): the same vocabularies and, on the eval examples, the same
    transformed values (float32 rounding: Beam batches each input differently)."""
    output_dir, (examples, parquet_examples) = taxi
    config = fc.load_feature_config(str(runs.TAXI_FEATURES), str(runs.TAXI_SCHEMA))
    schema = runs.schema_artifact(runs.TAXI_SCHEMA, os.path.join(output_dir, 'schema'))
    graphs = {}
    for name, artifact in (('examples', examples), ('parquet', parquet_examples)):
        graphs[name] = runs.run_transform(
            [artifact],
            schema,
            os.path.join(output_dir, f'transform_{name}'),
            config,
            disable_analyzer_cache=True,
            disable_statistics=True,
            materialize=False,
        ).transform_graph
    serialized = runs.read_tfrecord_gzip(os.path.join(examples.uri, 'Split-eval', '*.gz'))
    comparison = runs.compare_transform_graphs(
        graphs['examples'], graphs['parquet'], serialized, config
    )
    assert comparison.rows == examples.get_int_custom_property('rows_written_eval') > 1000
    assert comparison.mismatched_features == ()
    assert len(comparison.feature_max_abs_diff) == len(config.features) + 1  # and the label
    assert comparison.vocabularies_equal and all(comparison.vocabularies_equal.values())
    shutil.rmtree(os.path.join(output_dir, 'transform_examples'))
