"""Executor `Do` with hand-built artifacts in a temp dir; component constructor validation."""

import glob
import json
import os
import shutil

import pytest
import tensorflow as tf
from tfx.components.example_gen import driver as tfx_driver
from tfx.proto import example_gen_pb2
from tfx.types import standard_artifacts
from tfx.utils import proto_utils

from asynctrain.components.example_gen import component, executor, spec

FIXTURES = os.path.join(os.path.dirname(__file__), '..', '..', 'data', 'csv')
SCHEMA = os.path.join(FIXTURES, 'schema.pbtxt')


def exec_properties(input_base, **kwargs):
    """The exec_properties the component would hand its executor."""
    props = dict(component.CsvExampleGen(input_base=input_base, **kwargs).exec_properties)
    return {
        k: proto_utils.proto_to_json(v) if hasattr(v, 'DESCRIPTOR') else v for k, v in props.items()
    }


def run_do(props, output_dir):
    examples = standard_artifacts.Examples()
    examples.uri = str(output_dir)
    executor.Executor().Do({}, {spec.EXAMPLES_KEY: [examples]}, props)
    return examples


def read_split(examples, split):
    rows = []
    for path in sorted(glob.glob(os.path.join(examples.uri, f'Split-{split}', '*.gz'))):
        for record in tf.data.TFRecordDataset(path, compression_type='GZIP').as_numpy_iterator():
            feature = tf.train.Example.FromString(record).features.feature
            rows.append(
                (
                    list(feature['id'].int64_list.value),
                    [round(v, 3) for v in feature['price'].float_list.value],
                    list(feature['name'].bytes_list.value),
                )
            )
    return sorted(rows)


@pytest.fixture
def input_dir(tmp_path):
    def make(*names):
        directory = tmp_path / 'input'
        directory.mkdir(exist_ok=True)
        for name in names:
            shutil.copy(os.path.join(FIXTURES, name), directory / name)
        return str(directory)

    return make


def test_do_writes_splits_dead_letter_and_row_counts(input_dir, tmp_path):
    props = exec_properties(
        input_dir('wrong_column_count.csv', 'crlf.csv'), schema_path=SCHEMA, max_bad_fraction=0.5
    )
    examples = run_do(props, tmp_path / 'out')

    custom = {
        k: v.int_value
        for k, v in examples.mlmd_artifact.custom_properties.items()
        if k.startswith('rows_')
    }
    assert custom['rows_read'] == 6
    assert custom['rows_rejected'] == 2
    assert custom['rows_written'] == 4
    assert custom['rows_written_train'] + custom['rows_written_eval'] == 4
    assert examples.split_names == '["train", "eval"]'
    assert examples.get_string_custom_property('payload_format') == 'FORMAT_TF_EXAMPLE'

    rows = read_split(examples, 'train') + read_split(examples, 'eval')
    assert sorted(rows) == [
        ([1], [2.5], [b'alpha']),
        ([1], [2.5], [b'alpha']),
        ([2], [3.5], [b'beta']),
        ([4], [5.5], [b'delta']),
    ]
    assert len(read_split(examples, 'train')) == custom['rows_written_train']

    with open(os.path.join(examples.uri, spec.SUMMARY_FILE_NAME)) as f:
        summary = json.load(f)
    assert summary['rows_read'] == summary['rows_written'] + summary['rows_rejected'] == 6
    dead = [
        json.loads(line)
        for path in glob.glob(os.path.join(examples.uri, spec.DEAD_LETTER_DIR_NAME, '*.jsonl'))
        for line in open(path)
    ]
    assert sorted(
        (os.path.basename(d['file']), d['line'], d['reason'], d['raw']) for d in dead
    ) == [
        ('wrong_column_count.csv', 3, 'wrong column count: 2 of 3', '2,3.5'),
        ('wrong_column_count.csv', 4, 'wrong column count: 4 of 3', '3,4.5,gamma,extra'),
    ]


def test_max_bad_fraction_failure_names_file_line_and_reason(input_dir, tmp_path):
    props = exec_properties(input_dir('type_mismatch.csv'), schema_path=SCHEMA)
    with pytest.raises(RuntimeError) as error:
        run_do(props, tmp_path / 'out')
    message = str(error.value)
    assert '2 of 4 rows rejected' in message
    assert "type_mismatch.csv:3: column 'id': 'two' is not INT" in message
    assert "type_mismatch.csv:4: column 'price': 'cheap' is not FLOAT" in message


def test_rows_without_a_label_go_to_the_dead_letter_and_are_counted(input_dir, tmp_path):
    props = exec_properties(
        input_dir('missing_label.csv'),
        schema_path=SCHEMA,
        null_markers=['NA'],
        label_column='price',
        max_bad_fraction=0.5,
    )
    assert props[spec.LABEL_COLUMN_KEY] == 'price'
    examples = run_do(props, tmp_path / 'out')
    assert examples.get_int_custom_property('rows_read') == 6
    assert examples.get_int_custom_property('rows_rejected') == 3
    assert examples.get_int_custom_property('rows_written') == 3
    written = read_split(examples, 'train') + read_split(examples, 'eval')
    assert sorted(price for _, price, _ in written) == [[2.5], [6.5], [7.5]]
    dead = [
        json.loads(line)
        for path in glob.glob(os.path.join(examples.uri, spec.DEAD_LETTER_DIR_NAME, '*.jsonl'))
        for line in open(path)
    ]
    assert sorted((d['line'], d['reason'], d['raw']) for d in dead) == [
        (3, "label 'price' is missing", '2,,beta'),
        (4, "label 'price' is missing", '3,NA,gamma'),
        (5, "label 'price': 'cheap' is not FLOAT", '4,cheap,delta'),
    ]


def test_a_label_column_that_is_not_a_column_fails_naming_it(input_dir, tmp_path):
    props = exec_properties(input_dir('crlf.csv'), schema_path=SCHEMA, label_column='Species')
    with pytest.raises(ValueError, match="label_column 'Species' is not a column"):
        run_do(props, tmp_path / 'out')


def test_empty_input_is_a_clear_error(input_dir, tmp_path):
    with pytest.raises(ValueError, match='input is empty'):
        run_do(exec_properties(input_dir('header_only.csv'), schema_path=SCHEMA), tmp_path / 'out')


def test_missing_input_directory_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match='does not exist'):
        run_do(exec_properties(str(tmp_path / 'nowhere')), tmp_path / 'out')


def test_input_splits_and_span_pattern_as_stock(tmp_path):
    for span, name in ((1, 'crlf.csv'), (2, 'bom.csv')):
        for split in ('train', 'eval'):
            directory = tmp_path / 'input' / f'span-{span:02d}' / split
            directory.mkdir(parents=True)
            shutil.copy(os.path.join(FIXTURES, name), directory / 'data.csv')
    input_config = example_gen_pb2.Input(
        splits=[
            example_gen_pb2.Input.Split(name='train', pattern='span-{SPAN:2}/train/*'),
            example_gen_pb2.Input.Split(name='eval', pattern='span-{SPAN:2}/eval/*'),
        ]
    )
    props = exec_properties(
        str(tmp_path / 'input'),
        schema_path=SCHEMA,
        input_config=input_config,
        output_config=example_gen_pb2.Output(),
    )
    props = tfx_driver.FileBasedDriver(None).resolve_exec_properties(props, None, None)
    assert props['span'] == 2
    examples = run_do(props, tmp_path / 'out')
    # bom.csv (span 2) has 2 rows; each input split keeps its own rows.
    assert (
        read_split(examples, 'train')
        == read_split(examples, 'eval')
        == [([1], [2.5], [b'alpha']), ([2], [3.5], [b'beta'])]
    )
    assert examples.get_int_custom_property('rows_written_train') == 2


def test_constructor_rejects_bad_parameters_naming_them():
    with pytest.raises(ValueError, match='delimiter'):
        component.CsvExampleGen(input_base='/data', delimiter='ab')
    with pytest.raises(ValueError, match='max_bad_fraction'):
        component.CsvExampleGen(input_base='/data', max_bad_fraction=1.5)
    gen = component.CsvExampleGen(input_base='/data', null_markers=['NA'], quote_char=None)
    assert gen.exec_properties[spec.NULL_MARKERS_KEY] == '["NA"]'
    assert gen.exec_properties[spec.QUOTE_CHAR_KEY] == ''
    assert gen.outputs[spec.EXAMPLES_KEY].type == standard_artifacts.Examples


def test_a_dated_pattern_no_driver_resolved_is_resolved_by_the_executor(tmp_path):
    """As compiled for Kubeflow, where no TFX driver runs before the executor: the newest span
    (or the one range_config names) is read, and recorded on the artifact as the driver would."""
    from tfx.components.example_gen import utils as example_gen_utils
    from tfx.proto import range_config_pb2

    base = tmp_path / 'data'
    for day in ('2024-05-01', '2024-05-02'):
        (base / day).mkdir(parents=True)
        (base / day / 'part.csv').write_text('a\n1\n')
    pattern = '{YYYY}-{MM}-{DD}/*.csv'
    input_config = example_gen_pb2.Input(
        splits=[example_gen_pb2.Input.Split(name='single_split', pattern=pattern)]
    )
    properties = {
        'input_base': str(base),
        'input_config': proto_utils.proto_to_json(input_config),
    }
    examples = standard_artifacts.Examples()

    resolved = executor.resolve_input_span(properties, examples)

    newest = example_gen_utils.date_to_span_number(2024, 5, 2)
    assert resolved['span'] == newest == examples.get_int_custom_property('span')
    assert json.loads(resolved['input_config'])['splits'][0]['pattern'] == '2024-05-02/*.csv'
    assert resolved['input_fingerprint'].startswith('split:single_split,num_files:1')

    first = example_gen_utils.date_to_span_number(2024, 5, 1)
    range_config = range_config_pb2.RangeConfig(
        static_range=range_config_pb2.StaticRange(start_span_number=first, end_span_number=first)
    )
    named = executor.resolve_input_span(
        {**properties, 'range_config': proto_utils.proto_to_json(range_config)},
        standard_artifacts.Examples(),
    )
    assert json.loads(named['input_config'])['splits'][0]['pattern'] == '2024-05-01/*.csv'
    # Patterns a driver already resolved (a local run) are left as they are.
    plain = {**properties, 'input_config': resolved['input_config']}
    assert executor.resolve_input_span(plain, standard_artifacts.Examples()) is plain


def test_chunk_bytes_sets_how_many_files_each_split_has(tmp_path):
    """One file per chunk per split: the shards a distributed runner spreads the readers of the
    examples over. 400 rows of ~20 bytes in 1 KB chunks: 8 chunks, every row written once."""
    directory = tmp_path / 'input'
    directory.mkdir()
    rows = [f'{i},{i + 0.5},name{i:04d}' for i in range(400)]
    (directory / 'rows.csv').write_text('id,price,name\n' + '\n'.join(rows) + '\n')
    default = run_do(exec_properties(str(directory), schema_path=SCHEMA), tmp_path / 'default')
    small = run_do(
        exec_properties(str(directory), schema_path=SCHEMA, chunk_bytes=1024), tmp_path / 'small'
    )
    for examples, files in ((default, 1), (small, 8)):
        for split in ('train', 'eval'):
            assert len(glob.glob(os.path.join(examples.uri, f'Split-{split}', '*.gz'))) == files
    # The same rows in the same splits, whatever the chunking.
    for split in ('train', 'eval'):
        assert read_split(small, split) == read_split(default, split)
    assert len(read_split(small, 'train') + read_split(small, 'eval')) == 400
    with pytest.raises(ValueError, match='chunk_bytes must be >= 1, got 0'):
        component.CsvExampleGen(input_base=str(directory), chunk_bytes=0)
