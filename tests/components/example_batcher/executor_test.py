"""The ExampleBatcher's executor on hand-built artifacts: every split written pre-batched and
shuffled, with the properties it records; and the component's checks of its parameters."""

import glob
import json
import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow_transform.tf_metadata import dataset_metadata, metadata_io
from tfx.types import artifact_utils, channel, standard_artifacts

from asynctrain.components.example_batcher import component, executor, spec
from asynctrain.components.shared import columnar_records
from tests.components.example_batcher.batcher_testdata import FEATURE_SPEC, write_examples


def _artifact(cls, uri, split_names=None):
    artifact = cls()
    artifact.uri = str(uri)
    if split_names:
        artifact.split_names = json.dumps(split_names)
    return artifact


def test_executor_writes_every_split_pre_batched(tmp_path):
    transformed = tmp_path / 'transformed_examples'
    write_examples(str(transformed / 'Split-train'), 700)
    write_examples(str(transformed / 'Split-eval'), 130, first_id=700)
    graph = tmp_path / 'transform_graph'
    metadata_io.write_metadata(
        dataset_metadata.DatasetMetadata.from_feature_spec(FEATURE_SPEC),
        str(graph / 'transformed_metadata'),
    )
    batched = _artifact(standard_artifacts.Examples, tmp_path / 'batched')

    executor.Executor().Do(
        {
            spec.EXAMPLES_KEY: [
                _artifact(standard_artifacts.Examples, transformed, ['train', 'eval'])
            ],
            spec.TRANSFORM_GRAPH_KEY: [_artifact(standard_artifacts.TransformGraph, graph)],
        },
        {spec.BATCHED_EXAMPLES_KEY: [batched]},
        {spec.EXAMPLES_PER_RECORD_KEY: 100, spec.NUM_FILES_KEY: 2, spec.SEED_KEY: 0},
    )

    assert artifact_utils.decode_split_names(batched.split_names) == ['train', 'eval']
    assert batched.get_string_custom_property('examples_format') == columnar_records.FORMAT
    assert batched.get_int_custom_property('examples_per_record') == 100
    assert batched.get_int_custom_property('examples_train') == 700
    assert batched.get_int_custom_property('examples_eval') == 130
    for split, first_id, count in (('train', 0, 700), ('eval', 700, 130)):
        pattern = os.path.join(columnar_records.split_dir(batched.uri, split), '*.gz')
        metadata = columnar_records.read_metadata(pattern)
        # Each file's last record holds the rest of its examples.
        per_file = [
            sum(1 for _ in tf.data.TFRecordDataset(f, compression_type='GZIP'))
            for f in sorted(glob.glob(pattern))
        ]
        assert (metadata['examples'], metadata['files'], len(per_file)) == (count, 2, 2)
        assert metadata['records'] == sum(per_file)
        assert count / 100 <= metadata['records'] <= count / 100 + 2
        assert metadata['layout'] == 'seeded_hash_shards' and metadata['seed'] == 0
        assert metadata['features'] == {
            'company': 'int64',
            'fare': 'float32',
            'id': 'int64',
            'label': 'int64',
            'payment': 'string',
            'pickup': 'float32',
        }
        ids = np.concatenate(
            [
                f['id'].numpy()
                for f, _ in columnar_records.make_batched_dataset(
                    pattern, FEATURE_SPEC, 'label', 64, training=False
                )
            ]
        )
        np.testing.assert_array_equal(np.sort(ids), np.arange(first_id, first_id + count))
        assert not np.array_equal(ids, np.sort(ids)), split


def test_executor_names_an_examples_artifact_without_splits(tmp_path):
    graph = tmp_path / 'transform_graph'
    metadata_io.write_metadata(
        dataset_metadata.DatasetMetadata.from_feature_spec(FEATURE_SPEC),
        str(graph / 'transformed_metadata'),
    )
    with pytest.raises(ValueError, match='records no split_names'):
        executor.Executor().Do(
            {
                spec.EXAMPLES_KEY: [_artifact(standard_artifacts.Examples, tmp_path / 'ex')],
                spec.TRANSFORM_GRAPH_KEY: [_artifact(standard_artifacts.TransformGraph, graph)],
            },
            {spec.BATCHED_EXAMPLES_KEY: [_artifact(standard_artifacts.Examples, tmp_path / 'b')]},
            {spec.EXAMPLES_PER_RECORD_KEY: 100, spec.NUM_FILES_KEY: 2, spec.SEED_KEY: 0},
        )


def test_component_defaults_and_parameter_checks():
    examples = channel.Channel(type=standard_artifacts.Examples)
    graph = channel.Channel(type=standard_artifacts.TransformGraph)
    batcher = component.ExampleBatcher(examples=examples, transform_graph=graph)
    assert batcher.exec_properties == {
        'examples_per_record': 256,
        'num_files': 0,
        'seed': 0,
        'transform': 0,
    }
    assert batcher.outputs['batched_examples'].type == standard_artifacts.Examples
    with pytest.raises(ValueError, match='examples_per_record: expected an integer >= 1, got 0'):
        component.ExampleBatcher(examples=examples, transform_graph=graph, examples_per_record=0)
    with pytest.raises(ValueError, match=r'num_files: expected an integer >= 0 \(0: by size\)'):
        component.ExampleBatcher(examples=examples, transform_graph=graph, num_files=-1)
    with pytest.raises(ValueError, match='seed: expected an integer >= 0'):
        component.ExampleBatcher(examples=examples, transform_graph=graph, seed=-1)
