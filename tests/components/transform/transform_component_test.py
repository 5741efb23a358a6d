"""The stock TFX Transform executor with our generated preprocessing_fn, on hand-built artifacts.

Spans of taxi examples are written as ExampleGen writes them; `Executor().Do` analyzes the train
split, transforms and materializes every split, and writes the analyzer cache. The exported
transform graph must give, on raw serialized tf.Examples, what `AnalyzeAndTransformDataset` gives
in memory on the same rows; and a run over the window moved by one span must take the older span's
analysis from the cache instead of reading it again. The ExampleBatcher, applying that graph to the
raw examples itself (the pipeline's way), must write what stock Transform materializes.
"""

import dataclasses
import os

import numpy as np
import pyarrow as pa
import pytest
import tensorflow_transform as tft
import tensorflow_transform.beam as tft_beam
from tensorflow_metadata.proto.v0 import schema_pb2
from tensorflow_transform.tf_metadata import dataset_metadata
from tfx.types import standard_artifacts

from asynctrain.components.example_batcher import executor as batcher_executor
from asynctrain.components.example_batcher import spec as batcher_spec
from asynctrain.components.shared import columnar_records, feature_types
from asynctrain.components.transform import feature_config as fc
from asynctrain.components.transform import preprocessing
from asynctrain.testing import transform_runs as runs

# One pytest-xdist worker for the module: its module-scoped fixtures are built once.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.xdist_group('components.transform.transform_component_test'),
]

ROWS_PER_SPAN = 150
# One taxi feature per kind of transform (z-score, string and integer vocabularies, identity,
# quantile buckets), with the taxi config's settings, and `payment_type` hashed (the taxi config
# hashes nothing); the categorical ones are those the CSV most often leaves empty, so fills and
# OOV ids are exercised. Every analyzer adds Beam stages, and at
# this size the stages, not the rows, are what a run costs.
FEATURES = (
    'trip_miles',
    'company',
    'dropoff_community_area',
    'trip_start_hour',
    'dropoff_latitude',
)


@pytest.fixture(scope='module')
def taxi():
    schema = feature_types.load_schema(str(runs.TAXI_SCHEMA))
    config = fc.load_feature_config(str(runs.TAXI_FEATURES), str(runs.TAXI_SCHEMA))
    hashed = fc.FeatureSpec(name='payment_type', transform=fc.HASH, num_buckets=64)
    config = dataclasses.replace(
        config, features=(*(f for f in config.features if f.name in FEATURES), hashed)
    )
    assert {f.transform for f in config.features} == set(fc.TRANSFORMS)
    return schema, config, runs.read_taxi_table(schema)


@pytest.fixture(scope='module')
def workdir(tmp_path_factory):
    return str(tmp_path_factory.mktemp('transform'))


@pytest.fixture(scope='module')
def spans(taxi, workdir):
    """Spans 1-3: their rows per split, their serialized train examples, their artifacts."""
    _, _, table = taxi
    written = {}
    for span in (1, 2, 3):
        rows = runs.resample_span(table, span, ROWS_PER_SPAN)
        uri = runs.write_span(os.path.join(workdir, 'examples'), span, rows)
        written[span] = {
            'rows': runs.split_span(rows),
            'train_examples': runs.read_tfrecord_gzip(runs.split_file(uri, 'train')),
            'artifact': runs.examples_artifact(uri, span),
        }
    return written


@pytest.fixture(scope='module')
def schema_artifact(workdir):
    return runs.schema_artifact(runs.TAXI_SCHEMA, os.path.join(workdir, 'schema'))


@pytest.fixture(scope='module')
def first_run(taxi, spans, schema_artifact, workdir):
    """Spans 1-2 with the cache on. Statistics are off: they are TFDV's, not under test here."""
    _, config, _ = taxi
    return runs.run_transform(
        [spans[1]['artifact'], spans[2]['artifact']],
        schema_artifact,
        os.path.join(workdir, 'run_1_2'),
        config,
        disable_statistics=True,
    )


def _instances(table) -> list[dict]:
    """Instance dicts for in-memory tf.Transform: a missing cell is an empty list."""
    columns = table.to_pydict()
    return [
        {name: [] if columns[name][i] is None else [columns[name][i]] for name in columns}
        for i in range(table.num_rows)
    ]


def _analyze_and_transform_in_memory(schema, config, instances, temp_dir) -> dict[str, np.ndarray]:
    with tft_beam.Context(temp_dir=str(temp_dir), force_tf_compat_v1=False):
        (rows, _), _ = (instances, dataset_metadata.DatasetMetadata(schema)) | (
            tft_beam.AnalyzeAndTransformDataset(preprocessing.build_preprocessing_fn(config))
        )
    return {name: np.array([row[name] for row in rows]) for name in rows[0]}


def test_transform_graph_on_raw_examples_matches_in_memory_analyze_and_transform(
    taxi, spans, first_run, tmp_path
):
    schema, config, _ = taxi
    train_tables = [spans[1]['rows']['train'], spans[2]['rows']['train']]
    expected = _analyze_and_transform_in_memory(
        schema, config, _instances(train_tables[0]) + _instances(train_tables[1]), tmp_path
    )

    served = runs.transform_raw_examples(
        first_run.transform_graph, spans[1]['train_examples'] + spans[2]['train_examples']
    )

    assert set(served) == {f.name for f in config.features} | {config.label.name}
    assert set(served) == set(expected)
    rows = sum(t.num_rows for t in train_tables)
    for name, values in served.items():
        assert values.shape == (rows,), name
        if np.issubdtype(values.dtype, np.floating):
            np.testing.assert_allclose(values, expected[name], rtol=1e-5, atol=1e-6, err_msg=name)
        else:
            np.testing.assert_array_equal(values, expected[name], err_msg=name)
    # The data really exercises the fills and the OOV ids: the sample has missing cells.
    for name in ('company', 'dropoff_community_area', 'dropoff_latitude'):
        assert sum(t.column(name).null_count for t in train_tables) > 0, name
    assert 0 < served[config.label.name].sum() < rows


def test_transformed_schema_gives_every_categorical_feature_its_id_range(taxi, first_run):
    _, config, _ = taxi
    transformed = tft.TFTransformOutput(first_run.transform_graph).transformed_metadata.schema
    features = {f.name: f for f in transformed.feature}
    for spec in config.features:
        feature = features[spec.name]
        if spec.is_categorical:
            assert feature.type == schema_pb2.INT, spec.name
            assert (feature.int_domain.min, feature.int_domain.max) == (0, spec.cardinality - 1), (
                spec.name
            )
        else:
            assert feature.type == schema_pb2.FLOAT and not feature.HasField('int_domain')


def test_every_split_of_every_span_is_materialized(spans, first_run):
    # One transformed Examples artifact per input span, in order, each with both splits.
    assert len(first_run.transformed_examples) == 2
    for span, uri in zip((1, 2), first_run.transformed_examples):
        for split, table in spans[span]['rows'].items():
            records = runs.read_tfrecord_gzip(os.path.join(uri, f'Split-{split}', '*'))
            assert len(records) == table.num_rows, (span, split)


def test_moved_window_reads_the_older_span_from_the_cache(
    taxi, spans, schema_artifact, workdir, first_run
):
    _, config, _ = taxi
    assert runs.cached_datasets(first_run.updated_analyzer_cache) == [
        'Span-1/Split-train',
        'Span-2/Split-train',
    ]
    # Spans are immutable, so the cache keys a span's analysis by its file pattern alone. Rewrite
    # span 2's train split after it was cached: a run that reads span 2 again would see a
    # 'Tampered' company and 1000-mile trips; one that takes span 2 from the cache, the original.
    original = [spans[2]['rows']['train'], spans[3]['rows']['train']]
    tampered = spans[2]['rows']['train'].to_pydict()
    tampered['company'] = [b'Tampered'] * len(tampered['company'])
    tampered['trip_miles'] = [1000.0] * len(tampered['trip_miles'])
    runs.write_tfrecord_gzip(
        runs.split_file(spans[2]['artifact'].uri, 'train'),
        runs.encode_examples(pa.Table.from_pydict(tampered, schema=original[0].schema)),
    )

    second = runs.run_transform(
        [spans[2]['artifact'], spans[3]['artifact']],
        schema_artifact,
        os.path.join(workdir, 'run_2_3'),
        config,
        analyzer_cache=first_run.updated_analyzer_cache,
        disable_statistics=True,
    )

    output = tft.TFTransformOutput(second.transform_graph)
    companies = {v for t in original for v in t.column('company').drop_null().to_pylist()}
    assert set(output.vocabulary_by_name('company')) == companies
    miles = np.concatenate([t.column('trip_miles').drop_null().to_numpy() for t in original])
    miles = miles.astype(np.float64)
    served = runs.transform_raw_examples(second.transform_graph, spans[3]['train_examples'][:5])
    raw = spans[3]['rows']['train'].column('trip_miles').to_pylist()[:5]
    expected = [0.0 if v is None else (v - miles.mean()) / miles.std() for v in raw]
    np.testing.assert_allclose(served['trip_miles'], expected, rtol=1e-4, atol=1e-5)
    # The updated cache holds the new window: span 2 carried over, span 3 analyzed afresh.
    assert runs.cached_datasets(second.updated_analyzer_cache) == [
        'Span-2/Split-train',
        'Span-3/Split-train',
    ]


def _rows(columns: dict[str, np.ndarray]) -> list[tuple]:
    """Every example as a tuple of its values, feature by feature (names sorted), in sorted order:
    the examples as a multiset, whatever order they were written in."""
    names = sorted(columns)
    count = len(columns[names[0]])
    flat = {name: columns[name].reshape(count, -1) for name in names}
    return sorted(tuple(tuple(flat[name][i].tolist()) for name in names) for i in range(count))


def test_the_batcher_transforming_raw_examples_writes_what_stock_transform_materializes(
    spans, first_run, workdir
):
    # The pipeline's way: Transform writes the graph only and the ExampleBatcher applies it to
    # ExampleGen's examples. Its records must hold, example for example and feature by feature,
    # what stock Transform materializes with the same graph, on every split.
    graph = standard_artifacts.TransformGraph()
    graph.uri = first_run.transform_graph
    batched = standard_artifacts.Examples()
    batched.uri = os.path.join(workdir, 'batched_span_1')
    batcher_executor.Executor().Do(
        {
            batcher_spec.EXAMPLES_KEY: [spans[1]['artifact']],
            batcher_spec.TRANSFORM_GRAPH_KEY: [graph],
        },
        {batcher_spec.BATCHED_EXAMPLES_KEY: [batched]},
        {
            batcher_spec.EXAMPLES_PER_RECORD_KEY: 16,
            batcher_spec.NUM_FILES_KEY: 2,
            batcher_spec.SEED_KEY: 0,
            batcher_spec.TRANSFORM_KEY: 1,
        },
    )
    feature_spec = tft.TFTransformOutput(first_run.transform_graph).transformed_feature_spec()
    assert len(feature_spec) == len(FEATURES) + 2  # with the hashed feature and the label
    for split, table in spans[1]['rows'].items():
        stock = columnar_records.read_columns(
            os.path.join(first_run.transformed_examples[0], f'Split-{split}', '*'), feature_spec
        )
        pattern = os.path.join(columnar_records.split_dir(batched.uri, split), '*.gz')
        label = sorted(feature_spec)[0]
        ours = {name: [] for name in feature_spec}
        for features, labels in columnar_records.make_batched_dataset(
            pattern, feature_spec, label, batch_size=64, training=False
        ):
            for name, values in {**features, label: labels}.items():
                ours[name].append(values.numpy())
        ours = {name: np.concatenate(parts) for name, parts in ours.items()}
        assert len(ours[label]) == table.num_rows == len(stock[label]), split
        for name in feature_spec:
            assert ours[name].dtype == stock[name].dtype, name
        assert _rows(ours) == _rows(stock), split
