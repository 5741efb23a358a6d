"""Daily spans of taxi-like examples and stock TFX Transform executor runs over a window of them.

The pieces `asynctrain bench transform` is made of, shared with the component tests and the
other benches: resample the bundled taxi CSV into one GZIP TFRecord span per day (tf.Examples
typed by the schema, a missing cell an empty feature as stock CsvExampleGen writes it), wrap spans
as `Examples` artifacts, run `tfx.components.transform.executor.Executor().Do` with our generated
`preprocessing_fn` (with or without the analyzer cache), and compare two transform graphs on the
same raw examples.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import re
import shutil
import time
from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import tensorflow as tf
import tensorflow_transform as tft
from pyarrow import csv as pa_csv
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx.components.transform import executor as transform_executor
from tfx.components.util import examples_utils
from tfx.dsl.components.base import base_beam_executor
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils, standard_artifacts
from tfx.types import standard_component_specs as specs
from tfx_bsl.coders import example_coder

from asynctrain.components.transform import feature_config as fc
from asynctrain.components.transform import preprocessing
from asynctrain.pipelines.config import BUNDLED_SCHEMAS
from asynctrain.testing.taxi_data import taxi_csv_path

# The generated preprocessing_fn, as the pipeline names it to the Transform component.
PREPROCESSING_FN = 'asynctrain.components.transform.preprocessing.preprocessing_fn'
SPLITS = ('train', 'eval')
TAXI_SCHEMA = BUNDLED_SCHEMAS / 'taxi' / 'schema.pbtxt'
TAXI_FEATURES = BUNDLED_SCHEMAS / 'taxi' / 'features.yaml'
# Day 1 of the synthetic spans; span k holds trips started on day k.
FIRST_DAY = 1767225600  # 2026-01-01T00:00:00Z
SECONDS_PER_DAY = 86400
# The Transform outputs that exist only when statistics are on; stock Transform wants all or none.
_STATISTICS_OUTPUTS = {
    specs.PRE_TRANSFORM_STATS_KEY: standard_artifacts.ExampleStatistics,
    specs.PRE_TRANSFORM_SCHEMA_KEY: standard_artifacts.Schema,
    specs.POST_TRANSFORM_ANOMALIES_KEY: standard_artifacts.ExampleAnomalies,
    specs.POST_TRANSFORM_STATS_KEY: standard_artifacts.ExampleStatistics,
    specs.POST_TRANSFORM_SCHEMA_KEY: standard_artifacts.Schema,
}
_VALUE_TYPES = {
    schema_pb2.INT: pa.int64(),
    schema_pb2.FLOAT: pa.float32(),
    schema_pb2.BYTES: pa.large_binary(),
}


def read_taxi_table(schema: schema_pb2.Schema, csv_path: str | None = None) -> pa.Table:
    """The taxi CSV as one flat column per schema feature, typed by the schema; empty cell = null."""
    read_types = {
        schema_pb2.INT: pa.int64(),
        schema_pb2.FLOAT: pa.float64(),
        schema_pb2.BYTES: pa.string(),
    }
    table = pa_csv.read_csv(
        csv_path or taxi_csv_path(),
        convert_options=pa_csv.ConvertOptions(
            column_types={f.name: read_types[f.type] for f in schema.feature},
            strings_can_be_null=True,
        ),
    )
    # FLOAT parses as float64 and is rounded to float32, as a float_list stores it.
    return pa.table(
        {f.name: table.column(f.name).cast(_VALUE_TYPES[f.type]) for f in schema.feature}
    )


def resample_span(table: pa.Table, span: int, rows: int, seed: int = 0) -> pa.Table:
    """`rows` trips drawn with replacement from `table`, moved to day `span` (1-based).

    Each span draws with its own seed, so daily vocabularies and quantiles differ a little, as
    real days do; the time of day of `trip_start_timestamp` is kept.
    """
    rng = np.random.default_rng([seed, span])
    sample = table.take(pa.array(rng.integers(0, table.num_rows, rows)))
    if 'trip_start_timestamp' in sample.column_names:
        stamps = sample.column('trip_start_timestamp').to_numpy()
        day = FIRST_DAY + (span - 1) * SECONDS_PER_DAY
        sample = sample.set_column(
            sample.column_names.index('trip_start_timestamp'),
            'trip_start_timestamp',
            pa.array(day + np.mod(stamps, SECONDS_PER_DAY), pa.int64()),
        )
    return sample


def _as_single_value_lists(column: pa.ChunkedArray) -> pa.Array:
    """[v] per row, or a null list (an empty feature) where the cell is missing."""
    flat = column.combine_chunks()
    valid = pc.is_valid(flat).to_numpy(zero_copy_only=False)
    offsets = np.concatenate([[0], np.cumsum(valid)]).astype(np.int64)
    return pa.LargeListArray.from_arrays(pa.array(offsets), flat.drop_null(), mask=pa.array(~valid))


def encode_examples(table: pa.Table) -> list[bytes]:
    """Serialized tf.Examples, one per row; a null cell becomes an empty feature."""
    batch = pa.RecordBatch.from_arrays(
        [_as_single_value_lists(table.column(name)) for name in table.column_names],
        table.column_names,
    )
    return example_coder.RecordBatchToExamples(batch)


def write_tfrecord_gzip(path: str, records: Sequence[bytes]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tf.io.TFRecordWriter(path, options='GZIP') as writer:
        for record in records:
            writer.write(record)


def split_span(table: pa.Table, train_fraction: float = 2 / 3) -> dict[str, pa.Table]:
    """The span's rows cut into `train` (the first `train_fraction`) and `eval` (the rest)."""
    cut = int(round(table.num_rows * train_fraction))
    return {'train': table.slice(0, cut), 'eval': table.slice(cut)}


def write_span(examples_dir: str, span: int, table: pa.Table, train_fraction: float = 2 / 3) -> str:
    """Writes `Split-train` and `Split-eval` of one span under `examples_dir/Span-<span>`.

    Returns the span's directory, the URI of its `Examples` artifact. Its paths must stay the same
    from run to run: the analyzer cache keys each dataset by its file pattern.
    """
    uri = os.path.join(examples_dir, f'Span-{span}')
    for split, part in split_span(table, train_fraction).items():
        write_tfrecord_gzip(split_file(uri, split), encode_examples(part))
    return uri


def split_file(uri: str, split: str) -> str:
    """The one file of a split of a span written by `write_span`."""
    return os.path.join(uri, f'Split-{split}', 'data_tfrecord-00000-of-00001.gz')


def examples_artifact(
    uri: str, span: int, split_names: Sequence[str] = SPLITS
) -> standard_artifacts.Examples:
    """An `Examples` artifact as ExampleGen publishes it: span, split names, tf.Example payload."""
    examples = standard_artifacts.Examples()
    examples.uri = uri
    examples.span = span
    examples.split_names = artifact_utils.encode_split_names(list(split_names))
    examples_utils.set_payload_format(examples, example_gen_pb2.FORMAT_TF_EXAMPLE)
    return examples


def schema_artifact(schema_path: str | os.PathLike, uri: str) -> standard_artifacts.Schema:
    """A `Schema` artifact holding a copy of `schema_path` (the executor reads the only file)."""
    os.makedirs(uri, exist_ok=True)
    shutil.copyfile(schema_path, os.path.join(uri, 'schema.pbtxt'))
    schema = standard_artifacts.Schema()
    schema.uri = uri
    return schema


def _output(artifact_type, uri: str):
    os.makedirs(uri, exist_ok=True)
    artifact = artifact_type()
    artifact.uri = uri
    return artifact


@dataclasses.dataclass(frozen=True)
class TransformRun:
    """What one executor run left behind.

    Attributes:
      seconds: Wall time of `Executor.Do`.
      cpu_seconds: CPU time this process spent in it (Beam's DirectRunner works in-process), which
        other load on a shared machine disturbs less than the wall time.
      transform_graph: URI of the transform graph (a `tft.TFTransformOutput` directory).
      transformed_examples: URIs of the materialized examples, one per input span, in order.
      updated_analyzer_cache: URI of the written cache, or None when the cache was disabled.
    """

    seconds: float
    cpu_seconds: float
    transform_graph: str
    transformed_examples: tuple[str, ...]
    updated_analyzer_cache: str | None


def run_transform(
    examples: Sequence[standard_artifacts.Examples],
    schema: standard_artifacts.Schema,
    output_dir: str,
    config: fc.FeatureConfig,
    *,
    analyzer_cache: str | None = None,
    disable_analyzer_cache: bool = False,
    disable_statistics: bool = False,
    materialize: bool = True,
    beam_args: Sequence[str] = (),
) -> TransformRun:
    """Runs the stock Transform executor over `examples` as the Transform component wires it.

    Analyze train, transform every split, materialize. With the cache on (the component's
    default), `updated_analyzer_cache` is written and `analyzer_cache`, the URI of an earlier
    run's cache, is read; `disable_analyzer_cache` does neither, as the component's flag of
    that name. `materialize=False` writes the graph alone (no `transformed_examples`): with
    statistics off, stock Transform then skips its transform pass.
    """
    if disable_analyzer_cache and analyzer_cache:
        raise ValueError('analyzer_cache is set while disable_analyzer_cache is True')
    input_dict = {specs.EXAMPLES_KEY: list(examples), specs.SCHEMA_KEY: [schema]}
    if analyzer_cache:
        cache = standard_artifacts.TransformCache()
        cache.uri = analyzer_cache
        input_dict[specs.ANALYZER_CACHE_KEY] = [cache]
    output_dict = {
        specs.TRANSFORM_GRAPH_KEY: [
            _output(standard_artifacts.TransformGraph, os.path.join(output_dir, 'transform_graph'))
        ],
    }
    if materialize:
        output_dict[specs.TRANSFORMED_EXAMPLES_KEY] = [
            _output(standard_artifacts.Examples, os.path.join(output_dir, 'transformed_examples'))
        ]
    if not disable_analyzer_cache:
        output_dict[specs.UPDATED_ANALYZER_CACHE_KEY] = [
            _output(
                standard_artifacts.TransformCache,
                os.path.join(output_dir, 'updated_analyzer_cache'),
            )
        ]
    if not disable_statistics:
        for key, artifact_type in _STATISTICS_OUTPUTS.items():
            output_dict[key] = [_output(artifact_type, os.path.join(output_dir, key))]
    exec_properties = {
        specs.PREPROCESSING_FN_KEY: PREPROCESSING_FN,
        specs.CUSTOM_CONFIG_KEY: json.dumps(preprocessing.config_to_custom_config(config)),
        specs.FORCE_TF_COMPAT_V1_KEY: 0,
        specs.DISABLE_STATISTICS_KEY: int(disable_statistics),
    }
    context = base_beam_executor.BaseBeamExecutor.Context(
        beam_pipeline_args=list(beam_args),
        tmp_dir=os.path.join(output_dir, '.temp'),
        unique_id='transform',
    )
    start, cpu_start = time.perf_counter(), time.process_time()
    transform_executor.Executor(context).Do(input_dict, output_dict, exec_properties)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    cache = output_dict.get(specs.UPDATED_ANALYZER_CACHE_KEY)
    return TransformRun(
        seconds=seconds,
        cpu_seconds=cpu_seconds,
        transform_graph=output_dict[specs.TRANSFORM_GRAPH_KEY][0].uri,
        transformed_examples=tuple(
            a.uri for a in output_dict.get(specs.TRANSFORMED_EXAMPLES_KEY, [])
        ),
        updated_analyzer_cache=cache[0].uri if cache else None,
    )


def cached_datasets(cache_uri: str) -> list[str]:
    """The analyzed datasets a cache directory holds entries for, as `Span-<n>/Split-<name>`.

    Transform names a dataset after the last components of its file pattern, so a span written
    by `write_span` reads back as its span and split.
    """
    found = []
    for entry in sorted(pathlib.Path(cache_uri).iterdir()):
        match = re.search(r'Span-(\d+)-Split-(\w+?)-STAR', entry.name)
        if entry.is_dir() and any(entry.iterdir()) and match:
            found.append((int(match.group(1)), f'Span-{match.group(1)}/Split-{match.group(2)}'))
    return [name for _, name in sorted(found)]


def read_tfrecord_gzip(pattern: str) -> list[bytes]:
    files = sorted(tf.io.gfile.glob(pattern))
    return [r.numpy() for r in tf.data.TFRecordDataset(files, compression_type='GZIP')]


def transform_raw_examples(
    transform_graph: str, serialized: Sequence[bytes]
) -> dict[str, np.ndarray]:
    """Applies an exported transform graph to raw serialized tf.Examples, as serving does."""
    output = tft.TFTransformOutput(transform_graph)
    layer = output.transform_features_layer()
    raw = tf.io.parse_example(tf.constant(list(serialized)), output.raw_feature_spec())
    return {name: _dense(value).numpy() for name, value in layer(raw).items()}


def _dense(x) -> tf.Tensor:
    return tf.sparse.to_dense(x) if isinstance(x, tf.SparseTensor) else x


@dataclasses.dataclass(frozen=True)
class Comparison:
    """How two transform graphs agree on the same raw examples.

    Attributes:
      rows: Number of raw examples both graphs transformed.
      feature_max_abs_diff: For every output feature, the largest absolute difference.
      mismatched_features: Features whose values differ (floats beyond a 1e-6 relative and
        absolute tolerance, integers at all), or that only one graph outputs.
      vocabularies_equal: For every vocabulary file, whether both graphs hold the same entries in
        the same order.
    """

    rows: int
    feature_max_abs_diff: Mapping[str, float]
    mismatched_features: tuple[str, ...]
    vocabularies_equal: Mapping[str, bool]

    @property
    def outputs_match(self) -> bool:
        return not self.mismatched_features and all(self.vocabularies_equal.values())


def compare_transform_graphs(
    graph_a: str, graph_b: str, serialized: Sequence[bytes], config: fc.FeatureConfig
) -> Comparison:
    """Transforms `serialized` with both graphs and compares every feature and vocabulary."""
    a = transform_raw_examples(graph_a, serialized)
    b = transform_raw_examples(graph_b, serialized)
    diffs, mismatched = {}, []
    for name in sorted(set(a) | set(b)):
        if name not in a or name not in b or a[name].shape != b[name].shape:
            mismatched.append(name)
            continue
        diffs[name] = float(
            np.max(np.abs(a[name].astype(np.float64) - b[name].astype(np.float64)), initial=0.0)
        )
        if np.issubdtype(a[name].dtype, np.floating):
            same = np.allclose(a[name], b[name], rtol=1e-6, atol=1e-6)
        else:
            same = np.array_equal(a[name], b[name])
        if not same:
            mismatched.append(name)
    output_a, output_b = tft.TFTransformOutput(graph_a), tft.TFTransformOutput(graph_b)
    vocabularies = {
        spec.name: output_a.vocabulary_by_name(spec.name) == output_b.vocabulary_by_name(spec.name)
        for spec in config.features
        if spec.transform == fc.VOCABULARY
    }
    return Comparison(
        rows=len(serialized),
        feature_max_abs_diff=diffs,
        mismatched_features=tuple(mismatched),
        vocabularies_equal=vocabularies,
    )
