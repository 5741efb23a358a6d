"""`asynctrain run --compiled pipeline.yaml`: a compiled PipelineSpec run on this machine, task by
task, as open-source Kubeflow Pipelines 2.x would run it.

A smoke test before uploading, and the project's proof that the compiled pipeline runs, on the
KFP line `--kfp-version` names (`kfp_profiles`; the newest by default):

1. the compiled pipeline is refused for what the open-source backend refuses, with its reasons
   (`kfp_rules`), a pipeline root the launcher cannot stage artifacts under with the launcher's own message
   (`kfp_launcher.check_pipeline_root`), and local data or push paths, which a pod lacks;
2. the root DAG's tasks run one at a time in dependency order; each runs its container's own
   command and arguments, `python` being this interpreter, with `{{$}}` the ExecutorInput the
   driver would build (`kfp_driver`), in a pod of its own (`compiled_task`): its `/s3`,
   `/minio`, `/gcs` and `/tmp/kfp_outputs` hold only what the launcher downloaded from the
   object store for it (`kfp_launcher`);
3. after each task the launcher uploads its outputs' local paths to their URIs, and its outputs
   are what ML Metadata hands downstream: the driver's URIs merged with the executor's output
   file, through ML Metadata's value types, with an empty type schema;
4. a task whose cache is on and whose key matches an earlier run's succeeded execution of the
   same pipeline is not run: it publishes that execution's outputs (`kfp_cache`).

The image is not pulled: the checkout's code and `.venv` stand for it (`kubeflow/Dockerfile`).
With `--tfjob-local` the Trainer's TFJob runs as local processes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from typing import Any, TextIO

from asynctrain.components.shared import console
from asynctrain.pipelines.kubeflow.compile import compiled_pipeline, kfp_rules
from asynctrain.pipelines.kubeflow.container import kfp_storage
from asynctrain.pipelines.kubeflow.local_backend import (
    compiled_task,
    kfp_cache,
    kfp_cluster,
    kfp_container_args,
    kfp_driver,
    kfp_launcher,
    kfp_profiles,
)


class CompiledTaskFailed(RuntimeError):
    """A task exited non-zero; names the task, its log and the lines that matter in it."""

    def __init__(self, task: str, returncode: int, log_path: str):
        self.task = task
        self.returncode = returncode
        self.log_path = log_path
        self.cause = console.lines_that_matter(log_path)
        super().__init__(f'task {task} failed (exit status {returncode})')


@dataclasses.dataclass(frozen=True)
class TaskRun:
    """One task of a compiled run.

    Attributes:
      name: The task's name in the root DAG.
      seconds: How long its container command ran.
      log_path: Its stdout and stderr.
      outputs: Output name -> the artifacts as published (what a downstream task receives).
    """

    name: str
    seconds: float
    log_path: str
    outputs: dict[str, list[dict[str, Any]]]


@dataclasses.dataclass(frozen=True)
class CompiledRun:
    """A finished compiled run.

    Attributes:
      pipeline_name: `pipelineInfo.name`.
      run_id: The run's id.
      run_root: `<pipeline root>/<pipeline name>/<run id>`, under which every output lies.
      log_dir: One log per task, and `run.json` (this record).
      tasks: The tasks in the order they ran.
      kfp_version: The KFP line the run followed (`kfp_profiles.PROFILES`).
    """

    pipeline_name: str
    run_id: str
    run_root: str
    log_dir: str
    tasks: tuple[TaskRun, ...]
    kfp_version: str = kfp_profiles.NEWEST

    def artifact(self, task: str, output: str) -> dict[str, Any]:
        """The one artifact `task` published as `output`."""
        for run in self.tasks:
            if run.name == task:
                return run.outputs[output][0]
        raise KeyError(f'no task {task!r} in run {self.run_id}')

    def format(self) -> str:
        """The closing summary the console prints."""
        width = max(len(t.name) for t in self.tasks)
        lines = [f'compiled run {self.run_id} of {self.pipeline_name!r}: {len(self.tasks)} tasks']
        lines += [f'  {t.name:<{width}}  {t.seconds:7.1f}s' for t in self.tasks]
        names = {t.name for t in self.tasks}
        if 'DriftValidator' in names:
            from asynctrain.pipelines.run_summary import drift_text, drift_verdict

            published = self.artifact('DriftValidator', 'anomalies').get('metadata', {})
            lines.append('  ' + drift_text(drift_verdict(published.get)))
        if 'Evaluator' in names:
            blessed = self.artifact('Evaluator', 'blessing').get('metadata', {}).get('blessed')
            lines.append(f'  blessed: {"yes" if blessed == 1 else "no"}')
        if 'Pusher' in names:
            pushed = self.artifact('Pusher', 'pushed_model').get('metadata', {})
            lines.append(
                f'  pushed: {pushed.get("pushed_destination")}'
                if pushed.get('pushed') == 1
                else '  pushed: no (not blessed)'
            )
        lines.append(f'  outputs under {self.run_root}')
        lines.append(f'  logs under {self.log_dir}')
        return '\n'.join(lines)


def _argv(
    container: compiled_pipeline.ContainerSpec,
    executor_input: dict[str, Any],
    profile: kfp_profiles.KfpProfile,
) -> list[str]:
    """The command line the launcher runs (`kfp_launcher.command_line`), `python` being this
    interpreter and any other program found beside it or on the PATH."""
    argv = kfp_launcher.command_line(container, executor_input, profile)
    if argv[0] in ('python', 'python3'):
        argv[0] = sys.executable
    elif not os.path.isabs(argv[0]):
        beside = os.path.join(os.path.dirname(sys.executable), argv[0])
        argv[0] = beside if os.path.exists(beside) else shutil.which(argv[0]) or argv[0]
    return argv


@dataclasses.dataclass(frozen=True)
class _Task:
    """One container task as the driver hands it to the launcher.

    Attributes:
      name: The task's name in the root DAG.
      component: Its ComponentSpec.
      container: Its executor's container as the driver's pod spec hands it to the launcher
        (`kfp_container_args.pod_container`).
      executor_input: The `{{$}}` ExecutorInput, as the launcher parses it.
      log_path: Its log.
    """

    name: str
    component: compiled_pipeline.ComponentSpec
    container: compiled_pipeline.ContainerSpec
    executor_input: dict[str, Any]
    log_path: str


def _launch(
    task: _Task,
    run: kfp_driver.RunContext,
    processes: compiled_task.TaskProcesses,
    store: kfp_launcher.ObjectStore,
    out: TextIO,
    prefix: str,
) -> tuple[float, dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """The launcher around one task, in a pod of its own: inputs downloaded, the command run,
    outputs uploaded. Returns (seconds, output parameters, the outputs ML Metadata records).

    Raises:
      CompiledTaskFailed: the command failed, or the launcher failed the task after it (its
        message appended to the task's log, as it is in a pod's log).
    """
    pod = kfp_launcher.Pod(tempfile.mkdtemp(prefix=f'asynctrain-pod-{task.name}-'))
    run_root = kfp_driver.run_root(run)
    provisioned = {
        name: artifacts['artifacts']
        for name, artifacts in task.executor_input['outputs'].get('artifacts', {}).items()
    }
    try:
        pod.make()
        with _launcher_step(task):
            kfp_launcher.download_inputs(task.executor_input, pod, store, run.profile, run_root)
            kfp_launcher.prepare_output_folders(task.executor_input, pod)
        with _launcher_step(task):
            argv = _argv(task.container, task.executor_input, run.profile)
        env = {
            **os.environ,
            **_pod_environment(run),
            **{e.name: e.value for e in task.container.env},
        }
        print(f'{prefix}: running...', file=out, flush=True)
        started = time.monotonic()
        elapsed = console.ElapsedLine(prefix, out)
        try:
            returncode = processes.run(argv, env, task.log_path, pod.root)
        finally:
            elapsed.close()
        seconds = time.monotonic() - started
        kfp_launcher.write_executor_logs(provisioned, pod, task.log_path)
        if returncode != 0:
            kfp_launcher.upload_outputs(provisioned, pod, store, False, run.profile, run_root)
            raise CompiledTaskFailed(task.name, returncode, task.log_path)
        with _launcher_step(task):
            written = kfp_launcher.executor_output(task.executor_input, pod)
            parameters = kfp_launcher.collect_output_parameters(
                task.executor_input, written, task.component, pod
            )
            merged = kfp_driver.merge_executor_output(provisioned, written, run.profile)
            recorded = kfp_launcher.upload_outputs(merged, pod, store, True, run.profile, run_root)
    finally:
        shutil.rmtree(pod.root, ignore_errors=True)
    print(f'{prefix}: done in {seconds:.1f}s', file=out, flush=True)
    return seconds, parameters, recorded


def _pod_environment(run: kfp_driver.RunContext) -> dict[str, str]:
    """What every 2.x user container has in its environment from its pod
    (`compiler/argocompiler/common.go`, `commonEnvs`): its pod's name and UID, Argo's names
    here being `<workflow>-system-container-impl-<n>`."""
    return {
        'KFP_POD_NAME': f'{run.workflow_name}-system-container-impl-{uuid.uuid4().int % 10**10}',
        'KFP_POD_UID': str(uuid.uuid4()),
    }


@contextlib.contextmanager
def _launcher_step(task: _Task) -> Iterator[None]:
    """Fails the task as the launcher does when one of its own steps fails: its message at the
    end of the task's log (a pod's log has it), the task failed."""
    try:
        yield
    except (RuntimeError, ValueError, OSError) as e:
        with open(task.log_path, 'a', encoding='utf-8') as log:
            log.write(f'launcher: failed to execute component: {e}\n')
        raise CompiledTaskFailed(task.name, 1, task.log_path) from e


def run_compiled(
    pipeline_file: str,
    *,
    pipeline_root: str | None = None,
    run_id: str | None = None,
    log_dir: str | None = None,
    tfjob_local: bool = False,
    fresh_processes: bool = False,
    kfp_version: str = kfp_profiles.NEWEST,
    metadata_path: str | None = None,
    run_name: str = '',
    cluster: kfp_cluster.Cluster | None = None,
    out: TextIO | None = None,
) -> CompiledRun:
    """Runs the compiled pipeline in `pipeline_file` task by task; returns what each task published.

    Args:
      pipeline_file: A PipelineSpec YAML (`asynctrain compile --target kubeflow`).
      pipeline_root: Replaces the pipeline's `defaultPipelineRoot`: an s3:// or minio:// URI, at
        the S3 endpoint that `AWS_ENDPOINT_URL` names.
      run_id: The run's id; a new `run-<time>-<hex>` by default.
      log_dir: Where each task's log goes; `runs/compiled/<pipeline>/<run id>` by default.
      tfjob_local: Run the Trainer's TFJob (`distribution.cluster: tfjob`) as local processes.
      fresh_processes: Start each task as a new process, as a pod would, instead of forking it
        from one that imported the task modules once (`compiled_task`; 15-20 s less a task).
      kfp_version: The KFP line whose driver and launcher to follow (`kfp_profiles.PROFILES`).
      metadata_path: ML Metadata (artifact ids, cached executions) shared by the runs naming
        it; `runs/compiled/metadata.json`, or this run's own in a `log_dir` given.
      run_name: The run's display name (`{{$.pipeline_job_name}}`); the SDK's default,
        `<pipeline name> <local time>`, if ''.
      cluster: What the launcher reads from the cluster to reach the store
        (`kfp_cluster.Cluster`); by default `kfp_cluster.this_machine`: the line's default
        MinIO address served by `AWS_ENDPOINT_URL`, the Secret holding this process's keys.
      out: Where progress lines go (stdout by default).

    Raises:
      kfp_rules.PipelineRefused: open-source KFP would refuse the pipeline.
      kfp_launcher.StagingRefused: the launcher could not stage artifacts under the root.
      compiled_task.PodUnavailable: tasks cannot have mount namespaces of their own here.
      ValueError: the file is not a PipelineSpec kfp reads or has no pipeline root, an unknown
        `kfp_version`, or a task input the driver cannot resolve.
      CompiledTaskFailed: a task's command exited non-zero; the tasks after it did not run.
    """
    out = out or sys.stdout
    profile = kfp_profiles.profile(kfp_version)
    document = compiled_pipeline.read_document(pipeline_file)
    kfp_rules.check(document)
    pipeline = compiled_pipeline.parse(document)
    root = pipeline_root or pipeline.default_pipeline_root
    if not root:
        raise ValueError(f'{pipeline_file}: no defaultPipelineRoot; give --pipeline-root')
    kfp_launcher.check_pipeline_root(root)
    kfp_storage.check_pod_paths(pipeline)
    compiled_task.check_pods()
    name = pipeline.pipeline_info.name
    cluster = cluster or kfp_cluster.this_machine(profile)
    run = kfp_driver.RunContext(
        pipeline_name=name,
        run_id=run_id or time.strftime('run-%Y%m%d-%H%M%S-') + uuid.uuid4().hex[:6],
        pipeline_root=root,
        profile=profile,
        display_name=run_name,
        store_session_info=kfp_cache.store_session_info(root, profile, cluster),
    )
    metadata_path = metadata_path or (
        os.path.join(log_dir, 'metadata.json') if log_dir else kfp_cache.DEFAULT_PATH
    )
    log_dir = log_dir or os.path.join('runs', 'compiled', name, run.run_id)
    os.makedirs(log_dir, exist_ok=True)
    order = compiled_pipeline.task_order(pipeline)
    print(
        f'asynctrain: running compiled pipeline {name!r} ({len(order)} tasks) as open-source '
        f'{profile.describe()} would\n            run {run.run_id} ({run.display_name!r}, workflow '
        f'{run.workflow_name}), root {kfp_driver.run_root(run)}'
        f'\n            logs {log_dir}',
        file=out,
        flush=True,
    )
    processes = compiled_task.TaskProcesses(
        compiled_task.modules(pipeline), log_dir, tfjob_local, fresh_processes
    )
    try:
        with kfp_cache.metadata_store(metadata_path) as metadata:
            store = kfp_launcher.ObjectStore(
                kfp_cluster.s3_client(kfp_cluster.store_connection(root, profile, cluster))
            )
            finished = _run_tasks(pipeline, run, order, log_dir, processes, metadata, store, out)
    finally:
        processes.close()
    result = CompiledRun(
        name, run.run_id, kfp_driver.run_root(run), log_dir, tuple(finished), profile.version
    )
    with open(os.path.join(log_dir, 'run.json'), 'w', encoding='utf-8') as f:
        json.dump(dataclasses.asdict(result), f, indent=2)
    return result


def _driven(
    task_name: str,
    component: compiled_pipeline.ComponentSpec,
    container: compiled_pipeline.ContainerSpec,
    parameters: dict[str, Any],
    inputs: dict[str, list[dict[str, Any]]],
    run: kfp_driver.RunContext,
    log_path: str,
) -> _Task:
    """A container task as the driver hands it to the launcher: its outputs provisioned under
    a new task root, its pod's container and its ExecutorInput."""
    task_outputs = kfp_driver.outputs(component, kfp_driver.task_root(run, task_name), run.profile)
    executor_input = kfp_driver.executor_input(
        parameters,
        inputs,
        task_outputs['artifacts'],
        task_outputs['outputFile'],
        task_outputs['parameters'],
    )
    return _Task(
        task_name,
        component,
        kfp_container_args.pod_container(container, parameters, run.profile),
        json.loads(executor_input),
        log_path,
    )


def _run_tasks(
    pipeline: compiled_pipeline.PipelineSpec,
    run: kfp_driver.RunContext,
    order: list[str],
    log_dir: str,
    processes: compiled_task.TaskProcesses,
    metadata: kfp_cache.MetadataStore,
    store: kfp_launcher.ObjectStore,
    out: TextIO,
) -> list[TaskRun]:
    """The root DAG's tasks in `order`: each driven, then imported, taken from the cache or
    launched, and published; a container task that succeeded is recorded for the cache."""
    executors = compiled_pipeline.executors(pipeline)
    pipeline_inputs = kfp_driver.pipeline_inputs(pipeline.root)
    published: dict[str, dict[str, list[dict[str, Any]]]] = {}
    # Each task's output parameters, as the launcher publishes them from its executor output.
    output_parameters: dict[str, dict[str, Any]] = {}
    finished = []
    for index, task_name in enumerate(order, start=1):
        task = pipeline.root.dag.tasks[task_name]
        component = compiled_pipeline.component(pipeline, task)
        executor = executors[component.executor_label]
        prefix = f'[{index}/{len(order)}] {task_name}'
        parameters = kfp_driver.input_parameters(
            task_name, task, component, pipeline_inputs, output_parameters, run
        )
        log_path = os.path.join(log_dir, f'{task_name}.log')
        cache_key = None
        if executor.WhichOneof('spec') == 'importer':
            recorded = kfp_driver.importer_outputs(executor.importer, parameters, component)
            output_parameters[task_name], seconds = {}, 0.0
            print(f'{prefix}: imported', file=out, flush=True)
        else:
            inputs = {
                key: published[binding.task_output_artifact.producer_task][
                    binding.task_output_artifact.output_artifact_key
                ]
                for key, binding in sorted(task.inputs.artifacts.items())
            }
            launched = _driven(
                task_name, component, executor.container, parameters, inputs, run, log_path
            )
            cache_key = kfp_cache.fingerprint(
                launched.executor_input, component, executor.container
            )
            cached = (
                metadata.cached(run.pipeline_name, cache_key)
                if task.caching_options.enable_cache
                else None
            )
            if cached:
                published[task_name] = cached['outputs']
                output_parameters[task_name] = cached['parameters']
                finished.append(TaskRun(task_name, 0.0, log_path, published[task_name]))
                print(f'{prefix}: from cache', file=out, flush=True)
                continue
            seconds, output_parameters[task_name], recorded = _launch(
                launched, run, processes, store, out, prefix
            )
        published[task_name] = {
            key: [
                kfp_cache.published(
                    artifact, metadata.new_id(), key, run.profile, run.store_session_info
                )
                for artifact in artifacts
            ]
            for key, artifacts in recorded.items()
        }
        if cache_key is not None:
            metadata.record(
                run.pipeline_name, cache_key, published[task_name], output_parameters[task_name]
            )
        finished.append(TaskRun(task_name, seconds, log_path, published[task_name]))
    return finished
