"""The ExampleBatcher's Beam pipeline against its one-process writer: the DirectRunner, in memory
and with two worker processes, writes the same files byte for byte as `shuffled_shards.write_split`
for the same seed; every example is written once, transformed as the graph transforms it; the
executor picks the Beam pipeline on any runner but a direct one."""

import glob
import os

import apache_beam as beam
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft
import tensorflow_transform.beam as tft_beam
from apache_beam.options.pipeline_options import PipelineOptions
from tensorflow_transform.tf_metadata import schema_utils

from asynctrain.components.example_batcher import batching, executor
from asynctrain.components.shared import columnar_records, shuffled_shards
from tests.components.example_batcher.batcher_testdata import FEATURE_SPEC, columns, write_examples

# One pytest-xdist worker for the module: its module-scoped fixtures are built once.
pytestmark = pytest.mark.xdist_group('components.example_batcher.batching_test')

ROWS = 1500
EXAMPLES_PER_RECORD = 64
SHARDS = 5


def _preprocessing_fn(inputs):
    # No analyzer (a graph in seconds); log1p runs a vectorized float kernel.
    return {
        'id': inputs['id'],
        'fare_log': tf.math.log1p(inputs['fare']),
        'pickup': inputs['pickup'] * 2.0,
        'company': inputs['company'],
        'payment': inputs['payment'],
        'label': inputs['label'],
    }


@pytest.fixture(scope='module')
def split(tmp_path_factory):
    root = tmp_path_factory.mktemp('batching')
    source = write_examples(str(root / 'source'), ROWS, num_files=3)
    graph = str(root / 'transform_graph')
    metadata = tft.DatasetMetadata(schema_utils.schema_from_feature_spec(FEATURE_SPEC))
    values = columns(4)
    instances = [{name: values[name][i] for name in values} for i in range(4)]
    with beam.Pipeline() as pipeline, tft_beam.Context(temp_dir=str(root / 'tft_tmp')):
        transform_fn = (
            pipeline | beam.Create(instances),
            metadata,
        ) | tft_beam.AnalyzeDataset(_preprocessing_fn)
        _ = transform_fn | tft_beam.WriteTransformFn(graph)
        _ = metadata | tft_beam.WriteMetadata(
            os.path.join(graph, tft.TFTransformOutput.RAW_METADATA_DIR), pipeline
        )
    return root, source, graph


def _features(graph):
    return columnar_records.feature_dtypes(tft.TFTransformOutput(graph).transformed_feature_spec())


def _one_process(graph, source, output_dir, seed):
    stats = shuffled_shards.write_split(
        shuffled_shards.source_files(source),
        batching.load_decoder(graph, transform=True),
        output_dir,
        EXAMPLES_PER_RECORD,
        SHARDS,
        seed,
    )
    columnar_records.write_metadata(
        output_dir,
        shuffled_shards.split_metadata(
            stats, _features(graph), EXAMPLES_PER_RECORD, SHARDS, seed, columnar_records.FORMAT
        ),
    )


def _beam(graph, source, output_dir, seed, args):
    with beam.Pipeline(options=PipelineOptions(args)) as pipeline:
        _ = pipeline | batching.WriteBatchedSplit(
            shuffled_shards.source_files(source),
            output_dir,
            graph,
            True,
            _features(graph),
            EXAMPLES_PER_RECORD,
            SHARDS,
            seed,
        )


def _contents(output_dir):
    return {
        os.path.basename(p): open(p, 'rb').read()
        for p in sorted(glob.glob(os.path.join(output_dir, '*')))
    }


def test_beam_on_the_direct_runner_writes_the_one_process_bytes(split):
    root, source, graph = split
    _one_process(graph, source, str(root / 'one_process'), seed=3)
    _beam(graph, source, str(root / 'beam_in_memory'), 3, [])
    _beam(
        graph,
        source,
        str(root / 'beam_two_processes'),
        3,
        ['--direct_num_workers=2', '--direct_running_mode=multi_processing'],
    )
    want = _contents(root / 'one_process')
    assert sorted(want) == [
        columnar_records.METADATA_FILE_NAME,
        *(f'batches-{i:05d}-of-{SHARDS:05d}.gz' for i in range(SHARDS)),
    ]
    assert _contents(root / 'beam_in_memory') == want
    assert _contents(root / 'beam_two_processes') == want

    # Every example once, each value what the graph computes from the raw example.
    pattern = str(root / 'one_process' / '*.gz')
    metadata = columnar_records.read_metadata(pattern)
    assert (metadata['examples'], metadata['files'], metadata['seed']) == (ROWS, SHARDS, 3)
    output = tft.TFTransformOutput(graph)
    spec = output.transformed_feature_spec()
    got = {name: [] for name in spec}
    records = 0
    for serialized in tf.data.TFRecordDataset(sorted(glob.glob(pattern)), compression_type='GZIP'):
        records += 1
        for name, values in columnar_records.record_parser(spec)(serialized).items():
            got[name].append(values.numpy())
    got = {name: np.concatenate(parts) for name, parts in got.items()}
    assert records == metadata['records']
    order = np.argsort(got['id'])
    np.testing.assert_array_equal(got['id'][order], np.arange(ROWS))
    raw = tf.io.parse_example(
        [r.numpy() for r in tf.data.TFRecordDataset(sorted(glob.glob(source)), 'GZIP')],
        FEATURE_SPEC,
    )
    want_values = output.transform_features_layer()(raw)
    want_order = np.argsort(want_values['id'].numpy())
    for name in spec:
        got_values, want = got[name][order], want_values[name].numpy()[want_order]
        if want.dtype == np.float32:
            # The graph on all rows in one call: a vectorized kernel (log1p) may round a row's
            # last bit otherwise than in the writers' chunks, which is why both writers
            # transform the same chunks.
            np.testing.assert_array_max_ulp(got_values, want, maxulp=1)
        else:
            np.testing.assert_array_equal(got_values, want, err_msg=name)
    np.testing.assert_allclose(got['fare_log'][order], np.log1p(np.arange(ROWS) * 0.25), 1e-6)


def test_another_seed_writes_another_order_of_the_same_examples(split):
    root, source, graph = split
    _one_process(graph, source, str(root / 'seed_3'), seed=3)
    _one_process(graph, source, str(root / 'seed_4'), seed=4)
    first, second = _contents(root / 'seed_3'), _contents(root / 'seed_4')
    assert first.keys() == second.keys()
    assert all(first[name] != second[name] for name in first if name.endswith('.gz'))

    def ids(output_dir):
        return np.concatenate(
            [
                f['id'].numpy()
                for f, _ in columnar_records.make_batched_dataset(
                    str(output_dir / '*.gz'),
                    tft.TFTransformOutput(graph).transformed_feature_spec(),
                    'label',
                    100,
                    training=False,
                )
            ]
        )

    first_ids, second_ids = ids(root / 'seed_3'), ids(root / 'seed_4')
    assert not np.array_equal(first_ids, second_ids)
    np.testing.assert_array_equal(np.sort(first_ids), np.sort(second_ids))


def test_the_executor_writes_with_beam_on_any_runner_but_a_direct_one(monkeypatch):
    large = 1 << 40
    assert executor.uses_beam(['--runner=DataflowRunner'], 1)
    assert executor.uses_beam(['--runner', 'PortableRunner'], 1)
    assert not executor.uses_beam([], large)
    assert not executor.uses_beam(['--runner=DirectRunner', '--direct_num_workers=2'], large)
    monkeypatch.setattr(executor, 'ONE_PROCESS_MAX_SOURCE_BYTES', 1 << 20)
    assert executor.uses_beam([], 1 << 20) and not executor.uses_beam([], (1 << 20) - 1)
