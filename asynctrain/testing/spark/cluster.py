"""A Spark standalone cluster on 127.0.0.1 with Beam's Spark job server, for tests and benchmarks.

`SparkCluster` starts, as separate processes in their own process groups: a Spark Master, N
Workers (each with its own work dir, cores and memory), a pool of Beam Python SDK workers
(`asynctrain.testing.spark.sdk_worker_pool`, Beam's `BeamFnExternalWorkerPool` service, each worker
forked from a process that imported Beam and TensorFlow once) and Beam's Spark job server
(`org.apache.beam.runners.spark.SparkJobServerDriver`) pointed at the Master. A Beam pipeline run
with `beam_pipeline_args` is submitted to the job server, which runs it as one Spark application:
its driver (the SparkContext) lives in the job server's JVM, its executors on the Workers, and
each executor asks the pool for a Python SDK worker (`--environment_type=EXTERNAL`) to run the
Python transforms. On exit every process group is killed and waited for.

What ran is read back from Spark itself: the Master's JSON (`/json/`) gives each application's
final state; the application's event log (`spark.eventLog.*`, set on the job server's JVM, where
Beam's `SparkContextFactory` builds its `SparkConf` from system properties) gives every task's
executor; the Workers' work dirs (`<work dir>/<app id>/<executor id>/`) say which Worker ran
which executor, even for a Worker that was killed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence

from asynctrain.components.shared.ports import free_port
from asynctrain.testing.spark import jars
from asynctrain.testing.spark.apps import AppRun, TaskRun, read_event_log, task_ends
from asynctrain.testing.spark.process_groups import HOST, kill_group, listening

# Spark 3.5 on Java 17 needs these packages opened to its unnamed module (Spark's own launcher adds
# the same list, `JavaModuleOptions`, to the driver and executors it starts; the job server's
# driver is started here, so it needs them on its command line). Java 8 ignores them.
JAVA_MODULE_OPTIONS = ('-XX:+IgnoreUnrecognizedVMOptions',) + tuple(
    f'--add-opens=java.base/{package}=ALL-UNNAMED'
    for package in (
        'java.lang', 'java.lang.invoke', 'java.lang.reflect', 'java.io', 'java.net', 'java.nio',
        'java.util', 'java.util.concurrent', 'java.util.concurrent.atomic', 'sun.nio.ch',
        'sun.nio.cs', 'sun.security.action', 'sun.util.calendar',
    )
)  # fmt: skip
# Every JVM here is small and short-lived, on few cores: the C1 compiler alone and the serial
# collector spend less CPU on starting up than HotSpot's defaults (C2 and G1's threads). A
# benchmark of the JVM side's throughput should pass `jvm_options=()`.
LIGHT_JVM_OPTIONS = ('-XX:TieredStopAtLevel=1', '-XX:+UseSerialGC')
# A killed Worker is declared dead after 20 s instead of Spark's 60 (so that `restart_worker` soon
# finds the Master with the usual number of Workers). Master and Workers must agree: a Worker
# heartbeats every quarter of its own setting (5 s), and the Master drops a Worker it has not heard
# from within its setting (set on the Master alone, the Workers' 15 s beats got both dropped).
WORKER_TIMEOUT = {'spark.worker.timeout': '20'}


class SparkCluster:
    """A local Spark standalone cluster plus Beam's Spark job server, as a context manager.

    Everything it writes goes under `log_dir`: `logs/<process>.log`, `events/` (Spark event logs),
    `worker-<i>/` (each Worker's work dir: executors' stdout/stderr and the app's files),
    `artifacts/` (the job server's staged Beam artifacts).

    Args:
      log_dir: the folder for logs, event logs and work dirs (created).
      num_workers: Spark Workers to start (each one JVM, one executor per application).
      cores_per_worker: cores each Worker offers (its executor runs that many tasks at once).
      memory_per_worker_mb: memory each Worker offers; executors are given all of it.
      python_path: extra entries for the SDK workers' PYTHONPATH (the folder this process imports
        `asynctrain` from, and this process's PYTHONPATH, are added: workers import the same code).
      startup_timeout_s: how long to wait for each process to become ready.
      jvm_options: JVM flags for every JVM (Master, Workers, job server, executors).
      spark_conf: more Spark settings for every application (`spark.default.parallelism`, ...),
        given to the job server's JVM as system properties, which Beam's `SparkConf` reads.
    """

    def __init__(
        self,
        log_dir: pathlib.Path | str,
        num_workers: int = 2,
        cores_per_worker: int = 1,
        memory_per_worker_mb: int = 1024,
        python_path: Sequence[str] = (),
        startup_timeout_s: float = 120.0,
        jvm_options: Sequence[str] = LIGHT_JVM_OPTIONS,
        spark_conf: Mapping[str, str] | None = None,
    ):
        if num_workers < 1 or cores_per_worker < 1 or memory_per_worker_mb < 256:
            raise ValueError(
                f'SparkCluster needs num_workers >= 1, cores_per_worker >= 1 and '
                f'memory_per_worker_mb >= 256; got {num_workers}, {cores_per_worker}, '
                f'{memory_per_worker_mb}'
            )
        self.log_dir = pathlib.Path(log_dir).resolve()
        self.num_workers = num_workers
        self.cores_per_worker = cores_per_worker
        self.memory_per_worker_mb = memory_per_worker_mb
        self._python_path = list(python_path)
        self._timeout = startup_timeout_s
        self._jvm_options = tuple(jvm_options)
        self._spark_conf = dict(spark_conf or {})
        self._processes: dict[str, subprocess.Popen] = {}
        self.home: jars.SparkHome | None = None
        self.master_port = self.master_ui_port = self.pool_port = 0
        self.job_port = self.artifact_port = self.expansion_port = 0

    # ---- starting and stopping -------------------------------------------------------------

    def __enter__(self) -> SparkCluster:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def _start(self) -> None:
        self.home = jars.spark_home()
        for sub in ('logs', 'events', 'artifacts'):
            (self.log_dir / sub).mkdir(parents=True, exist_ok=True)
        self.master_port, self.master_ui_port = free_port(), free_port()
        self._spawn('master', self._java('org.apache.spark.deploy.master.Master', (
            '--host', HOST, '--port', str(self.master_port),
            '--webui-port', str(self.master_ui_port),
        ), system_properties=WORKER_TIMEOUT))  # fmt: skip
        self._wait('master', lambda: self.master_state().get('status') == 'ALIVE')
        # The Workers, the SDK worker pool and the job server start side by side (the job server
        # needs the Master only when a job comes); then each is waited for.
        for index in range(self.num_workers):
            self._start_worker(index)
        self.pool_port = free_port()
        self._spawn('sdk_worker_pool', [
            sys.executable, '-m', 'asynctrain.testing.spark.sdk_worker_pool',
            f'--service_port={self.pool_port}',
        ], env=self._python_env())  # fmt: skip
        self.job_port, self.artifact_port, self.expansion_port = (
            free_port(),
            free_port(),
            free_port(),
        )
        self._spawn('job_server', self._java('org.apache.beam.runners.spark.SparkJobServerDriver', (
            '--spark-master-url', self.master_url, '--job-host', HOST,
            '--job-port', str(self.job_port), '--artifact-port', str(self.artifact_port),
            '--expansion-port', str(self.expansion_port),
            '--artifacts-dir', str(self.log_dir / 'artifacts'),
        ), system_properties={
            'spark.eventLog.enabled': 'true',
            'spark.eventLog.dir': (self.log_dir / 'events').as_uri(),
            'spark.executor.memory': f'{self.memory_per_worker_mb}m',
            'spark.executor.extraJavaOptions': ' '.join(self._jvm_options),
            'spark.local.dir': str(self.log_dir / 'driver-local'),
            'spark.ui.enabled': 'false',
            'spark.driver.host': HOST, 'spark.driver.bindAddress': HOST,
            # Spark's own logging defaults from the start, not only once a SparkContext exists,
            # so the log shows the job server's start and each job's invocation.
            'log4j2.configurationFile': 'org/apache/spark/log4j2-defaults.properties',
            **self._spark_conf,
        }, heap_mb=1024))  # fmt: skip
        self._wait('workers', lambda: self.alive_workers() == self.num_workers)
        self._wait('sdk_worker_pool', lambda: listening(self.pool_port))
        self._wait('job_server', lambda: listening(self.job_port))

    def _start_worker(self, index: int) -> None:
        work_dir = self.log_dir / f'worker-{index}'
        work_dir.mkdir(parents=True, exist_ok=True)
        command = self._java('org.apache.spark.deploy.worker.Worker', (
            '--host', HOST, '--cores', str(self.cores_per_worker),
            '--memory', f'{self.memory_per_worker_mb}m', '--work-dir', str(work_dir),
            '--webui-port', str(free_port()), self.master_url,
        ), system_properties=WORKER_TIMEOUT)  # fmt: skip
        self._spawn(
            f'worker-{index}', command, env_extra={'SPARK_LOCAL_DIRS': str(work_dir / 'local')}
        )

    def _java(
        self,
        main_class: str,
        args: Sequence[str],
        system_properties: dict[str, str] | None = None,
        heap_mb: int = 256,
    ) -> list[str]:
        assert self.home is not None
        properties = [f'-D{key}={value}' for key, value in (system_properties or {}).items()]
        return [
            'java', f'-Xmx{heap_mb}m', *self._jvm_options, *JAVA_MODULE_OPTIONS, *properties,
            '-cp', self.home.classpath, main_class, *args,
        ]  # fmt: skip

    def _python_env(self) -> dict[str, str]:
        # The pool starts each SDK worker as `python -m ...` from PATH: this interpreter's bin
        # folder goes first, and PYTHONPATH carries the folders this process imports asynctrain
        # (and the test's modules) from, so workers unpickle the same functions.
        package_root = str(pathlib.Path(__file__).resolve().parents[3])
        entries = [*self._python_path, package_root, *os.environ.get('PYTHONPATH', '').split(':')]
        env = dict(os.environ)
        env['PATH'] = f'{pathlib.Path(sys.executable).parent}:{env.get("PATH", "")}'
        env['PYTHONPATH'] = ':'.join(dict.fromkeys(entry for entry in entries if entry))
        return env

    def _spawn(
        self,
        name: str,
        command: list[str],
        env: dict[str, str] | None = None,
        env_extra: dict[str, str] | None = None,
    ) -> None:
        assert self.home is not None
        env = dict(env or os.environ)
        env.update(
            SPARK_HOME=str(self.home.path), SPARK_SCALA_VERSION='2.12', SPARK_LOCAL_IP=HOST,
            **(env_extra or {}),
        )  # fmt: skip
        with open(self.log_dir / 'logs' / f'{name}.log', 'ab') as log:
            self._processes[name] = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=env, cwd=self.log_dir, start_new_session=True,
            )  # fmt: skip

    def _wait(self, what: str, ready: Callable[[], bool]) -> None:
        deadline = time.monotonic() + self._timeout
        while time.monotonic() < deadline:
            for name, process in self._processes.items():
                if process.poll() is not None and not name.startswith('worker-'):
                    raise RuntimeError(
                        f'{name} exited with {process.returncode}:\n{self.log_tail(name)}'
                    )
            with contextlib.suppress(OSError, ValueError):
                if ready():
                    return
            time.sleep(0.5)
        names = [name for name in self._processes if name.startswith(what.rstrip('s'))]
        tails = '\n'.join(f'--- {name}\n{self.log_tail(name)}' for name in names)
        raise TimeoutError(f'{what} not ready after {self._timeout:.0f} s; logs:\n{tails}')

    def stop(self) -> None:
        """Kills every process group this cluster started (job server first) and waits for them."""
        for name in reversed(list(self._processes)):
            process = self._processes.pop(name)
            kill_group(process, signal.SIGTERM, grace_s=10)

    def kill_worker(self, index: int) -> None:
        """SIGKILLs Worker `index` and its process group (the executors it launched) at once."""
        process = self._processes.pop(f'worker-{index}')
        kill_group(process, signal.SIGKILL, grace_s=0)

    def restart_worker(self, index: int) -> None:
        """Starts Worker `index` again (after `kill_worker`) and waits until the Master has it."""
        self._start_worker(index)
        self._wait('workers', lambda: self.alive_workers() == self.num_workers)

    # ---- what users pass and read ----------------------------------------------------------

    @property
    def master_url(self) -> str:
        return f'spark://{HOST}:{self.master_port}'

    @property
    def beam_pipeline_args(self) -> list[str]:
        """Beam pipeline options that run a pipeline on this cluster.

        `--files_to_stage` names only Beam's runner jar: the job server (a Java option it
        publishes to Python's PortableRunner) otherwise stages its whole classpath, ~230 jars that
        every executor would download per job. Executors already have every jar on their classpath
        (the Workers build it from SPARK_HOME/jars); on a real cluster, stage the shaded
        `beam-runners-spark-3-job-server` jar instead. `--environment_cache_millis` keeps an
        executor's SDK worker alive between a job's stages instead of starting one per task.
        """
        assert self.home is not None, 'the cluster is not started'
        return [
            '--runner=PortableRunner',
            f'--job_endpoint={HOST}:{self.job_port}',
            '--environment_type=EXTERNAL',
            f'--environment_config={HOST}:{self.pool_port}',
            f'--files_to_stage={self.home.runner_jar}',
            '--environment_cache_millis=60000',
        ]

    @property
    def worker_pids(self) -> list[int]:
        """The pid of each running Worker JVM, by index."""
        return [
            self._processes[f'worker-{index}'].pid
            for index in range(self.num_workers)
            if f'worker-{index}' in self._processes
        ]

    @property
    def sdk_worker_pool_pid(self) -> int:
        return self._processes['sdk_worker_pool'].pid

    def log_tail(self, name: str, chars: int = 3000) -> str:
        path = self.log_dir / 'logs' / f'{name}.log'
        return path.read_text(errors='replace')[-chars:] if path.exists() else ''

    def master_state(self) -> dict:
        """The Master's JSON status (workers, active and completed applications)."""
        url = f'http://{HOST}:{self.master_ui_port}/json/'
        with urllib.request.urlopen(url, timeout=5) as response:
            return json.load(response)

    def alive_workers(self) -> int:
        return sum(worker['state'] == 'ALIVE' for worker in self.master_state()['workers'])

    def app_ids(self) -> list[str]:
        """Every application the Master has seen, oldest first."""
        state = self.master_state()
        apps = state['completedapps'] + state['activeapps']
        return [app['id'] for app in sorted(apps, key=lambda app: app['starttime'])]

    def event_log(self, app_id: str) -> pathlib.Path:
        """The application's event log (`.inprogress` while it runs)."""
        finished = self.log_dir / 'events' / app_id
        return finished if finished.exists() else finished.with_name(app_id + '.inprogress')

    def executors_by_worker(self, app_id: str) -> dict[int, frozenset[str]]:
        return {
            index: frozenset(
                path.name for path in (self.log_dir / f'worker-{index}' / app_id).glob('*')
            )
            for index in range(self.num_workers)
        }

    def app_run(self, app_id: str) -> AppRun:
        """What the Master and the event log record of application `app_id`."""
        state = self.master_state()
        apps = {app['id']: app for app in state['completedapps'] + state['activeapps']}
        if app_id not in apps:
            raise KeyError(f'the Master at {self.master_url} knows no application {app_id!r}')
        by_worker = self.executors_by_worker(app_id)
        worker_of = {executor: index for index, ids in by_worker.items() for executor in ids}
        path = self.event_log(app_id)
        tasks = tuple(
            TaskRun(stage, partition, task, executor, worker_of.get(executor), reason)
            for stage, partition, task, executor, reason in task_ends(
                read_event_log(path) if path.exists() else []
            )
        )
        return AppRun(app_id, apps[app_id]['name'], apps[app_id]['state'], tasks, by_worker)


def main(argv: Sequence[str] | None = None) -> None:
    """Starts a cluster, prints its `beam_pipeline_args`, and keeps it up until interrupted."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument('log_dir', type=pathlib.Path, help='folder for logs, event logs, work dirs')
    parser.add_argument('--num_workers', type=int, default=2)
    parser.add_argument('--cores_per_worker', type=int, default=1)
    parser.add_argument('--memory_per_worker_mb', type=int, default=1024)
    args = parser.parse_args(argv)
    with SparkCluster(
        args.log_dir, args.num_workers, args.cores_per_worker, args.memory_per_worker_mb
    ) as cluster:
        print(f'Spark master {cluster.master_url}, UI http://{HOST}:{cluster.master_ui_port}')
        print('beam_pipeline_args:', ' '.join(cluster.beam_pipeline_args), flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()


if __name__ == '__main__':
    main()
