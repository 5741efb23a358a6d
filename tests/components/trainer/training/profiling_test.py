"""Profiler on demand: an in-process run captures a trace of the steps it was asked for, the trace
holds the workers' train step and their tf.data input pipeline, TensorBoard's profile plugin
opens it, and the verdict follows TF's thresholds."""

from __future__ import annotations

import collections
import importlib
import json
import os

import pytest
import tensorflow as tf

from asynctrain.components.shared import versions
from asynctrain.components.trainer import config as config_lib
from asynctrain.components.trainer.cluster import servers as cluster_lib
from asynctrain.components.trainer.training import loop, profiling, task, tasks

STEPS_PER_EXECUTION = 4


@pytest.mark.parametrize(
    'input_percent, verdict',
    [
        (0.0, 'not input-bound'),
        (4.99, 'not input-bound'),
        (5.0, 'moderately input-bound'),
        (19.99, 'moderately input-bound'),
        (20.0, 'highly input-bound'),
        (100.0, 'highly input-bound'),
    ],
)
def test_verdict_uses_tensorflows_thresholds(input_percent, verdict):
    assert profiling.input_bound_verdict(input_percent) == verdict


def test_analysis_needs_a_trace(tmp_path):
    with pytest.raises(ValueError, match=f'{tmp_path}: expected .xplane.pb files, found none'):
        profiling.analyze_trace(str(tmp_path))


def _config(
    train_steps: int, profile: config_lib.ProfileConfig | None = None
) -> config_lib.TrainerConfig:
    """A small multiclass run, STEPS_PER_EXECUTION steps per scheduled function, on one worker.

    One worker, so that every batch the trace counts belongs to an execution the trace holds:
    with two workers in one process both share the host's plane, and a batch of an execution
    that began before the capture can fall inside the other worker's execution and be counted
    (`profiling.analyze_trace` attributes a wait by time only).
    """
    return config_lib.TrainerConfig(
        task=config_lib.TaskConfig(type='multiclass'),
        distribution=config_lib.DistributionConfig(num_workers=1, num_ps=1),
        training=config_lib.TrainingConfig(
            train_steps=train_steps,
            batch_size=16,
            steps_per_execution=STEPS_PER_EXECUTION,
            checkpoint_interval_steps=0,
            summary_interval_steps=40,
        ),
        profile=profile or config_lib.ProfileConfig(),
    )


def _trainer(config, data, cluster, run_dir: str) -> loop.Trainer:
    schema = task.load_transformed_schema(data.transform_graph, data.label_key)
    return loop.Trainer(
        tasks.make_task(schema, config, data.transform_graph), cluster, data.examples, run_dir
    )


def _event_names(path: str) -> collections.Counter:
    names = collections.Counter()
    for plane in profiling.read_xspace(path).planes:
        for line in plane.lines:
            names.update(plane.event_metadata[e.metadata_id].name for e in line.events)
    return names


@pytest.mark.integration
@pytest.mark.fresh_process
def test_in_process_trace_holds_the_train_step_and_the_input_pipeline(multiclass_data, tmp_path):
    config = _config(160, profile=config_lib.ProfileConfig(start_step=40, num_steps=60))
    run_dir = str(tmp_path / 'run')
    with cluster_lib.start(config.distribution) as cluster:
        trainer = _trainer(config, multiclass_data, cluster, run_dir)
        measured = trainer.train()
    assert measured['steps'] == 160

    # One trace, where TensorBoard's profile plugin looks: <logdir>/plugins/profile/<run>/.
    runs = tf.io.gfile.glob(os.path.join(run_dir, 'plugins', 'profile', '*'))
    assert len(runs) == 1
    profile = measured['profile']
    assert profile['trace_dir'] == runs[0]
    paths = tf.io.gfile.glob(os.path.join(runs[0], '*.xplane.pb'))
    assert len(paths) == 1  # One host: the in-process cluster.

    # Read with the profiler's protos: the workers ran the train function, and their tf.data
    # iterators produced batches through the pipeline `data.make_dataset` builds.
    names = _event_names(paths[0])
    executions = [n for n in names if profiling.worker_execution_event('train_steps').match(n)]
    assert executions and sum(names[n] for n in executions) >= profile['executions']
    assert names['IteratorGetNextOp::DoCompute'] >= profile['steps']
    pipeline = [n for n in names if n.startswith('Iterator::Root::Prefetch::')]
    assert any('TFRecord' in n for n in pipeline), sorted(names)[:50]

    # The analysis counts whole executions inside the window: each took STEPS_PER_EXECUTION
    # batches (the zero-step warm-up runs before step 40 and is not in the trace).
    assert profile['executions'] >= 1
    assert profile['steps'] == STEPS_PER_EXECUTION * profile['executions']
    assert profile['steps'] <= 60 + 2 * STEPS_PER_EXECUTION * cluster.num_workers
    assert 0 < profile['input_wait_seconds'] < profile['step_seconds']
    assert profile['input_percent'] == pytest.approx(
        100 * profile['input_wait_seconds'] / profile['step_seconds']
    )
    assert profile['verdict'] == profiling.input_bound_verdict(profile['input_percent'])

    # Tensors handed between the worker and its parameter server, counted within the executions:
    # every step reads each trainable variable from the server and sends its update back, and
    # the runtime puts a `_Send` and a `_Recv` on each such edge (both tasks share this plane).
    transfer_events = sum(
        count for name, count in names.items() if name.endswith(profiling.TRANSFER_EVENT_SUFFIXES)
    )
    assert 0 < profile['transfers'] <= transfer_events
    assert 0 < profile['transfer_seconds'] < profile['step_seconds']
    assert profile['transfers_per_step'] == pytest.approx(profile['transfers'] / profile['steps'])
    assert profile['transfers_per_step'] >= 2 * len(trainer.model.trainable_variables)

    # TensorBoard's profile plugin converts the trace for its trace viewer.
    raw_to_tool_data = importlib.import_module(versions.PROFILE_CONVERTER_MODULE)

    data, content_type = raw_to_tool_data.xspace_to_tool_data(paths, 'trace_viewer^', {})
    assert content_type == 'application/json'
    viewer_names = {event.get('name') for event in json.loads(data)['traceEvents']}
    assert 'IteratorGetNextOp::DoCompute' in viewer_names
    assert set(executions) & viewer_names


@pytest.mark.integration
@pytest.mark.fresh_process
def test_a_worker_is_traced_through_its_servers_profiler_service(multiclass_data, tmp_path):
    """The path of `local_processes` and TFJob clusters: `client.trace` against a worker's gRPC
    server, here one of an in-process cluster (whose trace then covers the whole process)."""
    config = _config(200)
    run_dir = str(tmp_path / 'run')
    with cluster_lib.start(config.distribution) as cluster:
        trainer = _trainer(config, multiclass_data, cluster, run_dir)
        worker = cluster.resolver.cluster_spec().as_dict()['worker'][0]
        trace = profiling.StepTrace(
            config_lib.ProfileConfig(start_step=40, num_steps=80),
            run_dir,
            trainer.optimizer.iterations,
            worker_addresses=[worker],
        )
        trainer.train()
        analysis = trace.finish()

    host = worker.replace(':', '_')
    assert tf.io.gfile.glob(os.path.join(run_dir, 'plugins', 'profile', '*', '*.xplane.pb')) == [
        os.path.join(analysis.trace_dir, f'{host}.xplane.pb')
    ]
    assert analysis.executions >= 1
    assert analysis.steps == STEPS_PER_EXECUTION * analysis.executions
    assert 0 < analysis.input_wait_seconds < analysis.step_seconds
    assert analysis.transfers >= 2 * len(trainer.model.trainable_variables) * analysis.steps


def test_run_summary_prints_the_verdict_next_to_input_wait_fraction():
    from asynctrain.pipelines import run_summary

    summary = run_summary.RunSummary(
        executed=['Trainer'],
        cached=[],
        rows={},
        eval_metric=None,
        blessed=None,
        training={
            'examples_per_sec': 1000.0,
            'steps': 200,
            'input_wait_fraction': 0.1516,
            'profile': {'verdict': 'not input-bound', 'input_percent': 4.2, 'steps': 40},
        },
        pushed_model=None,
    )
    assert summary.format().splitlines()[2] == (
        'input: not input-bound per the profiler trace (4.2% of step time waiting for input over '
        '40 steps); input_wait_fraction 0.152'
    )
