"""On each committed dataset, the ExampleBatcher applying the transform graph to the raw examples
writes what stock Transform materializes with that graph: the same rows, every feature's value
bit for bit, on both splits (the rows' order differs: the batcher shuffles)."""

import os

import numpy as np
import pytest
import tensorflow_transform as tft
from tfx.types import standard_artifacts
from tfx.utils import proto_utils

from asynctrain.benchmarks import preprocess
from asynctrain.components.example_batcher import executor as batcher_executor
from asynctrain.components.example_batcher import spec as batcher_spec
from asynctrain.components.example_gen import component as example_gen_component
from asynctrain.components.example_gen import executor as example_gen_executor
from asynctrain.components.example_gen import spec as example_gen_spec
from asynctrain.components.shared import columnar_records
from asynctrain.components.transform import feature_config as fc
from asynctrain.testing import transform_runs as runs

pytestmark = pytest.mark.integration

REPO = os.path.join(os.path.dirname(__file__), '..', '..', '..')
# The three datasets of docs/own-data.md, one per task, with their CSV's null markers.
DATASETS = {'penguins': ['NA'], 'diabetes': [], 'breast_cancer': []}


def _example_gen(dataset: str, null_markers, label: str, output_dir: str):
    directory = os.path.join(REPO, 'datasets', dataset)
    props = dict(
        example_gen_component.CsvExampleGen(
            input_base=os.path.join(directory, 'data'),
            schema_path=os.path.join(directory, 'schema.pbtxt'),
            null_markers=null_markers,
            max_bad_fraction=0.02,
            label_column=label,
        ).exec_properties
    )
    props = {
        k: proto_utils.proto_to_json(v) if hasattr(v, 'DESCRIPTOR') else v for k, v in props.items()
    }
    examples = standard_artifacts.Examples()
    examples.uri = output_dir
    example_gen_executor.Executor().Do({}, {example_gen_spec.EXAMPLES_KEY: [examples]}, props)
    return examples


@pytest.mark.parametrize('dataset', sorted(DATASETS))
def test_the_batcher_applying_the_graph_writes_what_transform_materializes(dataset, tmp_path):
    directory = os.path.join(REPO, 'datasets', dataset)
    schema_path = os.path.join(directory, 'schema.pbtxt')
    config = fc.load_feature_config(os.path.join(directory, 'features.yaml'), schema_path)
    examples = _example_gen(
        dataset, DATASETS[dataset], config.label.column, str(tmp_path / 'examples')
    )
    stock = runs.run_transform(
        [examples],
        runs.schema_artifact(schema_path, str(tmp_path / 'schema')),
        str(tmp_path / 'transform'),
        config,
        disable_analyzer_cache=True,
        disable_statistics=True,
    )
    graph = standard_artifacts.TransformGraph()
    graph.uri = stock.transform_graph
    batched = standard_artifacts.Examples()
    batched.uri = str(tmp_path / 'batched')
    batcher_executor.Executor().Do(
        {batcher_spec.EXAMPLES_KEY: [examples], batcher_spec.TRANSFORM_GRAPH_KEY: [graph]},
        {batcher_spec.BATCHED_EXAMPLES_KEY: [batched]},
        {
            batcher_spec.EXAMPLES_PER_RECORD_KEY: 16,
            batcher_spec.NUM_FILES_KEY: 2,
            batcher_spec.SEED_KEY: 0,
            batcher_spec.TRANSFORM_KEY: 1,
        },
    )
    feature_spec = tft.TFTransformOutput(stock.transform_graph).transformed_feature_spec()
    assert len(feature_spec) == len(config.features) + 1  # and the label
    for split in ('train', 'eval'):
        written = examples.get_int_custom_property(
            example_gen_spec.ROWS_WRITTEN_SPLIT_PROPERTY_PREFIX + split
        )
        materialized = columnar_records.read_columns(
            os.path.join(stock.transformed_examples[0], f'Split-{split}', '*'), feature_spec
        )
        expected = preprocess.sorted_rows(materialized)
        ours = preprocess.split_rows(batched.uri, split, feature_spec)
        assert expected.shape == ours.shape == (written, len(feature_spec)), split
        np.testing.assert_array_equal(ours, expected, err_msg=f'{dataset} {split}')
