"""End to end: the bundled pipeline with every Beam stage on a Spark standalone cluster.

The cluster (`asynctrain.testing.spark.cluster`): a Master and two Workers (separate JVMs,
one core each), Beam's Spark job server, and a pool of Python SDK worker processes, all on
127.0.0.1. The pipeline runs as `asynctrain run` runs it, with the cluster's `beam_pipeline_args`:
ExampleGen, Transform, the ExampleBatcher and the Evaluator each submit a Beam job that Spark runs
as one application.

Checked:
- every application FINISHED in the Master's records, with successful tasks on both Workers
  (Spark's event logs); none of our DoFns ran in this, the submitting, process (their methods
  are wrapped here to record any call; the same wrappers do record the DirectRunner's calls);
- each stage's outputs equal the DirectRunner's: the stage's execution read back from ML Metadata
  and run again in this process on the DirectRunner with the same inputs (`stage_rerun`):
  ExampleGen's files byte for byte and its statistics, Transform's vocabularies and transformed
  values, the ExampleBatcher's files byte for byte (same seed), the Evaluator's metrics;
- the pushed model serves raw rows;
- one Worker killed (SIGKILL, with its executor) while the ExampleBatcher's job runs: Spark
  reruns the lost tasks on the other Worker, the job finishes, the files are the same bytes.
"""

from __future__ import annotations

import csv
import glob
import os
import pathlib
import threading
import time

import apache_beam as beam
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_model_analysis as tfma
import tensorflow_transform as tft

from asynctrain.components.evaluator import scoring
from asynctrain.components.evaluator import spec as evaluator_spec
from asynctrain.components.evaluator.component import Evaluator
from asynctrain.components.example_batcher import batching
from asynctrain.components.example_batcher import spec as batcher_spec
from asynctrain.components.example_batcher.component import ExampleBatcher
from asynctrain.components.example_gen import csv_source
from asynctrain.components.example_gen import spec as example_gen_spec
from asynctrain.components.example_gen.component import CsvExampleGen
from asynctrain.pipelines.config import load_config
from asynctrain.pipelines.local_runner import run_local
from asynctrain.testing.spark.cluster import SparkCluster
from tests import nested_values
from tests.e2e import stage_rerun
from tests.e2e.local_pipeline_e2e_test import _raw_example
from tests.shared_data import write_taxi_sample

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group('spark')]

ROWS = 3000
# ~0.4 MB of CSV in 48 KiB chunks: 8 chunks, 8 files per split, work for both Workers.
CHUNK_MB = 48 / 1024
# The DoFns of ours that the Beam stages run (ExampleGen, ExampleBatcher, Evaluator).
OUR_DOFNS = (csv_source._ConvertChunk, scoring._ScoreBatches)


class CallRecorder:
    """Wraps `process` of each DoFn class so that any call in this process is recorded."""

    def __init__(self, classes):
        self.calls: list[str] = []
        self._classes = classes
        self._originals = {}

    def __enter__(self) -> CallRecorder:
        for cls in self._classes:
            original = cls.process
            self._originals[cls] = original

            def recorded(dofn, *args, _original=original, _name=cls.__name__, **kwargs):
                self.calls.append(_name)
                return _original(dofn, *args, **kwargs)

            cls.process = recorded
        return self

    def __exit__(self, *exc) -> None:
        for cls, original in self._originals.items():
            cls.process = original


def _batcher_dofns():
    return tuple(
        value
        for value in vars(batching).values()
        if isinstance(value, type) and issubclass(value, beam.DoFn)
    )


@pytest.fixture(scope='module')
def cluster(tmp_path_factory):
    with SparkCluster(tmp_path_factory.mktemp('spark_cluster')) as running:
        yield running


@pytest.fixture(scope='module')
def spark_run(cluster, tmp_path_factory):
    sample = tmp_path_factory.mktemp('spark_sample')
    write_taxi_sample(sample, ROWS)
    config = load_config(
        data=str(sample),
        work_dir=str(tmp_path_factory.mktemp('spark_run') / 'work'),
        example_gen={'chunk_mb': CHUNK_MB},
        trainer={'training': {'train_steps': 100, 'eval_steps': 10}},
        beam_pipeline_args=cluster.beam_pipeline_args,
    )
    before = set(cluster.app_ids())
    with CallRecorder(OUR_DOFNS + _batcher_dofns()) as recorder:
        summary = run_local(config)
    apps = [app for app in cluster.app_ids() if app not in before]
    return config, summary, apps, recorder.calls, sample


def _outputs_equal_bytes(left: str, right: str, pattern: str) -> None:
    names = sorted(os.path.relpath(p, left) for p in glob.glob(os.path.join(left, pattern)))
    assert names, f'no files {pattern} in {left}'
    assert names == sorted(
        os.path.relpath(p, right) for p in glob.glob(os.path.join(right, pattern))
    )
    for name in names:
        assert pathlib.Path(left, name).read_bytes() == pathlib.Path(right, name).read_bytes(), name


# Fields of TFDV's statistics that come from its quantile sketches (median, quantile and
# equal-width histograms, values-per-example histograms): they depend on the order in which rows
# reach the sketch, which differs from one runner to another (docs/benchmarks.md says the same of
# StatisticsGen). Counts, types, domains, min, max, mean and deviation do not.
_SKETCHED = {'histograms', 'median', 'numValuesHistogram', 'weightedNumValuesHistogram'}


def _statistics(outputs, split: str) -> dict:
    from google.protobuf import json_format
    from tensorflow_metadata.proto.v0 import statistics_pb2

    path = os.path.join(
        outputs[example_gen_spec.STATISTICS_KEY][0].uri, f'Split-{split}', 'FeatureStats.pb'
    )
    statistics = statistics_pb2.DatasetFeatureStatisticsList.FromString(
        pathlib.Path(path).read_bytes()
    )

    def without_sketches(value):
        if isinstance(value, dict):
            return {k: without_sketches(v) for k, v in value.items() if k not in _SKETCHED}
        if isinstance(value, list):
            return [without_sketches(v) for v in value]
        return value

    # Features in name order: the order of the merged list depends on the order of the merges.
    for dataset in statistics.datasets:
        dataset.features.sort(key=lambda feature: feature.path.SerializeToString())
    return without_sketches(json_format.MessageToDict(statistics))


def _check_every_beam_stage_ran_on_the_cluster_in_worker_processes(spark_run, cluster):
    config, summary, apps, calls, _ = spark_run
    assert summary.blessed is True
    # ExampleGen, Transform, the ExampleBatcher and the Evaluator: a Spark application each.
    assert len(apps) >= 4, apps
    for app_id in apps:
        run = cluster.app_run(app_id)
        assert run.state == 'FINISHED', (app_id, run.state)
        assert run.workers_with_successful_tasks() == {0, 1}, (app_id, run.tasks)
    assert calls == [], f'DoFns ran in the submitting process: {sorted(set(calls))}'


def _check_each_stage_equals_the_direct_runner(spark_run, tmp_path):
    config = spark_run[0]

    # ExampleGen: the same files, byte for byte, and the same statistics.
    parameters = list(CsvExampleGen.SPEC_CLASS.PARAMETERS)
    execution = stage_rerun.last_execution(config, 'CsvExampleGen', parameters)
    with CallRecorder(OUR_DOFNS) as recorder:
        direct = stage_rerun.rerun(CsvExampleGen, execution, str(tmp_path / 'example_gen'))
    assert 'ConvertChunk' in ''.join(recorder.calls)  # The recorder sees in-process DoFns.
    spark_examples = execution.outputs[example_gen_spec.EXAMPLES_KEY][0].uri
    direct_examples = direct[example_gen_spec.EXAMPLES_KEY][0].uri
    _outputs_equal_bytes(spark_examples, direct_examples, 'Split-*/*.gz')
    assert len(glob.glob(os.path.join(spark_examples, 'Split-train', '*.gz'))) == 8
    for split in ('train', 'eval'):
        nested_values.assert_close(
            _statistics(execution.outputs, split), _statistics(direct, split), split
        )

    # Transform: the same vocabularies and the same transformed values.
    from tfx.components.transform.component import Transform

    execution = stage_rerun.last_execution(
        config, 'Transform', list(Transform.SPEC_CLASS.PARAMETERS)
    )
    direct = stage_rerun.rerun(Transform, execution, str(tmp_path / 'transform'))
    spark_graph = execution.outputs['transform_graph'][0].uri
    direct_graph = direct['transform_graph'][0].uri
    _outputs_equal_bytes(spark_graph, direct_graph, 'transform_fn/assets/*')
    raw = [
        record
        for record in tf.data.TFRecordDataset(
            sorted(glob.glob(os.path.join(spark_examples, 'Split-eval', '*.gz'))),
            compression_type='GZIP',
        )
        .take(256)
        .as_numpy_iterator()
    ]
    transformed = []
    for graph in (spark_graph, direct_graph):
        output = tft.TFTransformOutput(graph)
        features = tf.io.parse_example(tf.constant(raw), output.raw_feature_spec())
        transformed.append(
            {k: v.numpy() for k, v in output.transform_raw_features(features).items()}
        )
    assert transformed[0].keys() == transformed[1].keys()
    for name in transformed[0]:
        np.testing.assert_allclose(
            transformed[0][name], transformed[1][name], rtol=1e-6, err_msg=name
        )

    # The ExampleBatcher: the same files, byte for byte, for the same seed.
    execution = stage_rerun.last_execution(
        config, 'ExampleBatcher', list(ExampleBatcher.SPEC_CLASS.PARAMETERS)
    )
    direct = stage_rerun.rerun(ExampleBatcher, execution, str(tmp_path / 'batcher'))
    _outputs_equal_bytes(
        execution.outputs[batcher_spec.BATCHED_EXAMPLES_KEY][0].uri,
        direct[batcher_spec.BATCHED_EXAMPLES_KEY][0].uri,
        'Split-*/*',
    )

    # The Evaluator: the same metrics, the same verdict.
    execution = stage_rerun.last_execution(
        config, 'Evaluator', list(Evaluator.SPEC_CLASS.PARAMETERS)
    )
    direct = stage_rerun.rerun(Evaluator, execution, str(tmp_path / 'evaluator'))
    metrics = [
        tfma.load_metrics(artifacts[evaluator_spec.EVALUATION_KEY][0].uri)
        for artifacts in (execution.outputs, direct)
    ]
    values = [
        {
            key.name: value.double_value.value
            for m in metric
            for kv in m.metric_keys_and_values
            for key, value in [(kv.key, kv.value)]
        }
        for metric in metrics
    ]
    assert values[0].keys() == values[1].keys() and values[0]
    for name in values[0]:
        assert values[0][name] == pytest.approx(values[1][name], rel=1e-9, abs=1e-12), name
    blessed = [
        os.path.exists(os.path.join(a[evaluator_spec.BLESSING_KEY][0].uri, 'BLESSED'))
        for a in (execution.outputs, direct)
    ]
    assert blessed == [True, True]


def _check_the_pushed_model_serves_raw_rows(spark_run):
    summary, sample = spark_run[1], spark_run[4]
    with open(sample / 'data.csv', newline='') as f:
        rows = list(csv.DictReader(f))[:8]
    loaded = tf.saved_model.load(summary.pushed_model)
    scores = loaded.signatures['serving_default'](
        examples=tf.constant([_raw_example(r) for r in rows])
    )['probabilities'].numpy()
    assert scores.shape == (8, 1)
    assert ((scores > 0) & (scores < 1)).all()


def _check_a_worker_killed_mid_job_the_job_finishes_with_the_same_files(
    spark_run, cluster, tmp_path
):
    """Last: it leaves the cluster with one Worker until it restarts the other."""
    config = spark_run[0]
    execution = stage_rerun.last_execution(
        config, 'ExampleBatcher', list(ExampleBatcher.SPEC_CLASS.PARAMETERS)
    )
    before = set(cluster.app_ids())
    result: dict = {}

    def run_on_cluster():
        try:
            result['outputs'] = stage_rerun.rerun(
                ExampleBatcher, execution, str(tmp_path / 'batcher'), cluster.beam_pipeline_args
            )
        except BaseException as e:  # Reported by the assertion below.
            result['error'] = e

    job = threading.Thread(target=run_on_cluster)
    job.start()
    # Kill Worker 1 as soon as the job's application has a task that ended on it.
    deadline = time.monotonic() + 120
    killed = False
    while job.is_alive() and time.monotonic() < deadline and not killed:
        new = [app for app in cluster.app_ids() if app not in before]
        if new and any(t.worker == 1 for t in cluster.app_run(new[-1]).tasks):
            cluster.kill_worker(1)
            killed = True
        time.sleep(0.2)
    job.join(timeout=300)
    try:
        assert killed, 'the job ended before a task ended on Worker 1'
        assert 'error' not in result, result.get('error')
        app = cluster.app_run([a for a in cluster.app_ids() if a not in before][-1])
        assert app.state == 'FINISHED'
        _outputs_equal_bytes(
            execution.outputs[batcher_spec.BATCHED_EXAMPLES_KEY][0].uri,
            result['outputs'][batcher_spec.BATCHED_EXAMPLES_KEY][0].uri,
            'Split-*/*',
        )
    finally:
        if killed:
            cluster.restart_worker(1)


def test_the_pipeline_on_a_spark_cluster(spark_run, cluster, tmp_path):
    """One test, the checks in this order: the run's fixtures are set up once (pytest-xdist
    tears a module's fixtures down between tests it hands out one at a time), and the Worker is
    killed last."""
    _check_every_beam_stage_ran_on_the_cluster_in_worker_processes(spark_run, cluster)
    _check_the_pushed_model_serves_raw_rows(spark_run)
    _check_each_stage_equals_the_direct_runner(spark_run, tmp_path / 'direct')
    _check_a_worker_killed_mid_job_the_job_finishes_with_the_same_files(
        spark_run, cluster, tmp_path / 'killed'
    )
