"""Beam Python pipelines on a local Spark standalone cluster (a Master, two Workers) through Beam's
Spark job server: outputs equal the DirectRunner's, tasks run on both Workers, the Python
transforms run in the SDK worker pool's processes, and a Worker killed mid-job does not lose data.

One cluster serves the module; the test that kills a Worker runs last.
"""

import os
import threading
import time

import pytest

from asynctrain.testing.spark import probe
from asynctrain.testing.spark.apps import read_event_log
from asynctrain.testing.spark.cluster import SparkCluster

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group('spark_cluster')]

NUM_RECORDS = 2000
NUM_KEYS = 40


@pytest.fixture(scope='module')
def cluster(tmp_path_factory):
    with SparkCluster(tmp_path_factory.mktemp('spark'), num_workers=2) as running:
        yield running


@pytest.fixture(scope='module')
def probe_input(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp('probe_input')
    records = probe.input_records(NUM_RECORDS, NUM_KEYS)
    for shard in range(2):
        probe.write_input(folder / f'records-{shard}.tfrecord.gz', records[shard::2])
    return str(folder / 'records-*.tfrecord.gz')


@pytest.fixture(scope='module')
def direct_summaries(probe_input, tmp_path_factory) -> list[dict]:
    output_dir = tmp_path_factory.mktemp('direct')
    probe.run(probe_input, str(output_dir), ['--runner=DirectRunner'])
    summaries = probe.read_summaries(output_dir)
    # The DirectRunner runs the DoFns in this process.
    assert {tuple(process) for summary in summaries for process in summary['processes']} == {
        (os.getpid(), os.getppid())
    }
    return probe.without_processes(summaries)


def run_on_cluster(cluster, probe_input, output_dir, **kwargs) -> str:
    """Runs the probe on the cluster; returns the id of the Spark application it ran as."""
    before = set(cluster.app_ids())
    probe.run(probe_input, str(output_dir), cluster.beam_pipeline_args, **kwargs)
    (app_id,) = set(cluster.app_ids()) - before
    return app_id


@pytest.fixture(scope='module')
def cluster_run(cluster, probe_input, tmp_path_factory):
    output_dir = tmp_path_factory.mktemp('on_spark')
    app_id = run_on_cluster(cluster, probe_input, output_dir)
    return output_dir, cluster.app_run(app_id)


def test_direct_runner_reference_has_every_key(direct_summaries):
    assert [summary['key'] for summary in direct_summaries] == [
        f'key-{key:03d}' for key in range(NUM_KEYS)
    ]
    assert sum(summary['sum'] for summary in direct_summaries) == sum(range(NUM_RECORDS))


def test_outputs_equal_direct_runner(cluster_run, direct_summaries):
    output_dir, _ = cluster_run
    assert probe.without_processes(probe.read_summaries(output_dir)) == direct_summaries


def test_application_finished_with_tasks_on_both_workers(cluster_run):
    _, app = cluster_run
    assert app.state == 'FINISHED'
    assert app.name.startswith('BeamApp-')
    # One executor on each Worker, and each of them ran tasks to success.
    assert all(len(executors) == 1 for executors in app.executors_by_worker.values())
    assert app.workers_with_successful_tasks() == {0, 1}
    assert all(task.succeeded for task in app.tasks)


def test_dofns_ran_in_sdk_workers_started_by_the_pool(cluster, cluster_run):
    output_dir, _ = cluster_run
    processes = {
        tuple(process)
        for summary in probe.read_summaries(output_dir)
        for process in summary['processes']
    }
    pids = {pid for pid, _ in processes}
    # An SDK worker per executor, neither of them this process; each forked by the pool's fork
    # server, itself a child of the pool.
    assert len(pids) >= 2
    assert os.getpid() not in pids
    (server,) = {parent for _, parent in processes}
    with open(f'/proc/{server}/stat') as f:
        assert int(f.read().rsplit(') ', 1)[1].split()[1]) == cluster.sdk_worker_pool_pid
    with open(f'/proc/{server}/cmdline', 'rb') as f:
        assert b'asynctrain.components.shared.fork_server' in f.read().split(b'\0')


def test_job_survives_a_worker_killed_mid_job(cluster, probe_input, direct_summaries, tmp_path):
    progress_dir = tmp_path / 'progress'
    progress_dir.mkdir()
    output_dir = tmp_path / 'out'
    before = set(cluster.app_ids())
    killed_worker_pid = cluster.worker_pids[1]

    errors = []

    def submit():
        try:
            probe.run(
                probe_input,
                str(output_dir),
                cluster.beam_pipeline_args,
                sleep_s=0.25,
                progress_dir=str(progress_dir),
            )
        except Exception as error:  # noqa: BLE001 - re-raised in the test's thread below
            errors.append(error)

    job = threading.Thread(target=submit)
    job.start()
    # Kill once the slow per-key step has summarised its first key: 40 keys at 0.25 s each are
    # still ahead, so the kill lands mid-job whichever executor ran that key.
    deadline = time.monotonic() + 120
    while not any(progress_dir.iterdir()):
        assert job.is_alive() and time.monotonic() < deadline, f'no key summarised: {errors}'
        time.sleep(0.1)
    keys_done_at_kill = len(list(progress_dir.iterdir()))
    cluster.kill_worker(1)
    job.join(timeout=240)
    assert not job.is_alive() and not errors, errors

    assert keys_done_at_kill < NUM_KEYS
    assert probe.without_processes(probe.read_summaries(output_dir)) == direct_summaries
    (app_id,) = set(cluster.app_ids()) - before
    app = cluster.app_run(app_id)
    assert app.state == 'FINISHED'
    assert killed_worker_pid not in cluster.worker_pids
    # The driver saw the killed Worker's executor go and finished the job on the other one.
    (lost_executor,) = app.executors_by_worker[1]
    removed = [
        event['Executor ID']
        for event in read_event_log(cluster.event_log(app_id))
        if event.get('Event') == 'SparkListenerExecutorRemoved'
    ]
    assert lost_executor in removed
    # Spark ran again on the surviving Worker what the killed one's executor had been running.
    lost = {
        (task.stage_id, task.partition)
        for task in app.tasks
        if task.worker == 1 and not task.succeeded
    }
    assert lost, app.tasks
    rerun = {
        (task.stage_id, task.partition) for task in app.tasks if task.worker == 0 and task.succeeded
    }
    assert lost <= rerun

    # The cluster is whole again for whoever uses it next.
    cluster.restart_worker(1)
    assert cluster.alive_workers() == 2 and killed_worker_pid not in cluster.worker_pids
