"""`asynctrain run --compiled pipeline.yaml`: a compiled PipelineSpec run on this machine, task by
task, as open-source Kubeflow Pipelines 2.x would run it.

A smoke test before uploading, and the project's proof that the compiled pipeline runs:

1. the spec is refused for what the open-source backend refuses, with its reasons (`kfp_rules`);
2. the root DAG's tasks run one at a time in dependency order; each runs its container's own
   command and arguments (TFX's Kubeflow V2 entrypoint), `python` being this interpreter, with
   `{{$}}` the ExecutorInput the driver would build (`kfp_driver`);
3. after each task, its outputs are what the launcher publishes: the driver's URIs, merged with
   the executor's output file, through ML Metadata's value types, then handed downstream.

The container image is not pulled: the checkout's own code and `.venv` stand for it (the image is
built from them, `kubeflow/Dockerfile`). In the Trainer's `tfjob` cluster mode the TFJob runs as
local processes (`components.trainer.kubernetes.local`), as `--tfjob-local` asks.
"""

from __future__ import annotations

import dataclasses
import graphlib
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from typing import Any, TextIO

import yaml

from components import console
from pipelines import kfp_driver, kfp_rules


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
    """

    pipeline_name: str
    run_id: str
    run_root: str
    log_dir: str
    tasks: tuple[TaskRun, ...]

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
            from pipelines.run_summary import drift_text, drift_verdict

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


def load_spec(path: str) -> dict[str, Any]:
    """The PipelineSpec in `path` (the YAML `asynctrain compile --target kubeflow` writes, or a
    PipelineJob JSON, whose `pipelineSpec` is taken)."""
    with open(path, encoding='utf-8') as f:
        document = yaml.safe_load(f)
    if not isinstance(document, dict):
        raise ValueError(f'{path}: expected a PipelineSpec mapping, got {type(document).__name__}')
    return document.get('pipelineSpec', document)


def task_order(spec: dict[str, Any]) -> list[str]:
    """The root DAG's tasks in an order that runs every producer before its consumers."""
    tasks = spec['root']['dag']['tasks']
    graph = {}
    for name, task in tasks.items():
        upstream = set(task.get('dependentTasks', []))
        inputs = task.get('inputs', {})
        for kind, key in (
            ('artifacts', 'taskOutputArtifact'),
            ('parameters', 'taskOutputParameter'),
        ):
            for value in inputs.get(kind, {}).values():
                if key in value:
                    upstream.add(value[key]['producerTask'])
        graph[name] = upstream
    # Ties broken by name, so that a run's order is the same every time.
    sorter = graphlib.TopologicalSorter({k: sorted(v) for k, v in sorted(graph.items())})
    order = []
    sorter.prepare()
    while sorter.is_active():
        ready = sorted(sorter.get_ready())
        order.extend(ready)
        sorter.done(*ready)
    return order


def _argv(container: dict[str, Any], invocation: str) -> list[str]:
    """The container's command and args, `{{$}}` filled and `python` this interpreter."""
    argv = [*container.get('command', []), *container.get('args', [])]
    for index, arg in enumerate(argv):
        if arg == '{{$}}':
            argv[index] = invocation
        elif '{{$' in arg:
            raise ValueError(
                f'container argument {arg!r}: only the {{{{$}}}} placeholder is run here'
            )
    if argv and argv[0] in ('python', 'python3'):
        argv[0] = sys.executable
    elif argv and not os.path.isabs(argv[0]):
        beside = os.path.join(os.path.dirname(sys.executable), argv[0])
        argv[0] = beside if os.path.exists(beside) else shutil.which(argv[0]) or argv[0]
    return argv


class TaskProcesses:
    """Runs task commands: `python -m MODULE ...` forked from a server that imported the modules
    once (`pipelines.compiled_task`), or, `fresh`, every command as a new process."""

    def __init__(self, modules: list[str], log_dir: str, tfjob_local: bool, fresh: bool):
        self._tfjob_log_dir = os.path.join(log_dir, 'tfjob') if tfjob_local else None
        self._server = None
        self._fresh = fresh
        if not fresh:
            preload = [arg for module in modules for arg in ('--preload', module)]
            self._server_log = open(os.path.join(log_dir, 'task-server.log'), 'w')  # noqa: SIM115
            self._server = subprocess.Popen(
                [sys.executable, '-m', 'pipelines.compiled_task', '--serve', *preload],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._server_log,
                text=True,
            )

    def run(self, argv: list[str], env: dict[str, str], log_path: str) -> int:
        """The command's exit status; its stdout and stderr go to `log_path`."""
        if self._fresh or argv[1:2] != ['-m']:
            if self._tfjob_log_dir and argv[1:2] == ['-m']:
                argv = [
                    sys.executable,
                    '-c',
                    'import sys; from pipelines import compiled_task; '
                    'compiled_task.run_module_argv(sys.argv[2:], sys.argv[1])',
                    self._tfjob_log_dir,
                    *argv[1:],
                ]
            with open(log_path, 'w', encoding='utf-8') as log:
                return subprocess.call(
                    argv, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
                )
        request = {
            'argv': argv[1:],
            'env': env,
            'log_path': os.path.abspath(log_path),
            'tfjob_log_dir': self._tfjob_log_dir,
        }
        self._server.stdin.write(json.dumps(request) + '\n')
        self._server.stdin.flush()
        reply = self._server.stdout.readline()
        if not reply:
            raise RuntimeError(f'the task server exited; see {self._server_log.name}')
        return json.loads(reply)['returncode']

    def close(self) -> None:
        if self._server is not None:
            self._server.stdin.close()
            self._server.wait()
            self._server_log.close()


def _run_task(
    name: str,
    argv: list[str],
    env: dict[str, str],
    log_path: str,
    processes: TaskProcesses,
    out: TextIO,
    prefix: str,
) -> float:
    print(f'{prefix}: running...', file=out, flush=True)
    started = time.monotonic()
    elapsed = console.ElapsedLine(prefix, out)
    try:
        returncode = processes.run(argv, env, log_path)
    finally:
        elapsed.close()
    seconds = time.monotonic() - started
    if returncode != 0:
        raise CompiledTaskFailed(name, returncode, log_path)
    print(f'{prefix}: done in {seconds:.1f}s', file=out, flush=True)
    return seconds


def _modules(spec: dict[str, Any]) -> list[str]:
    """The modules the spec's containers run with `python -m`, and those of the executor classes
    they name (`--executor_class_path`), in a stable order."""
    modules = set()
    for executor in spec['deploymentSpec']['executors'].values():
        container = executor.get('container', {})
        command, args = container.get('command', []), container.get('args', [])
        if command[:2] in (['python', '-m'], ['python3', '-m']) and len(command) > 2:
            modules.add(command[2])
        for flag, value in zip(args, args[1:]):
            if flag == '--executor_class_path':
                modules.add(value.rsplit('.', 1)[0])
    return sorted(modules)


def run_compiled(
    spec_path: str,
    *,
    pipeline_root: str | None = None,
    run_id: str | None = None,
    log_dir: str | None = None,
    tfjob_local: bool = False,
    fresh_processes: bool = False,
    out: TextIO | None = None,
) -> CompiledRun:
    """Runs the compiled pipeline in `spec_path` task by task; returns what each task published.

    Args:
      spec_path: A PipelineSpec YAML (`asynctrain compile --target kubeflow`).
      pipeline_root: Replaces the spec's `defaultPipelineRoot` (a local directory for a smoke
        test of a spec compiled for a bucket).
      run_id: The run's id; a new `run-<time>-<hex>` by default.
      log_dir: Where each task's log goes; `runs/compiled/<pipeline>/<run id>` by default.
      tfjob_local: Run the Trainer's TFJob (`distribution.cluster: tfjob`) as local processes.
      fresh_processes: Start every task's command as a new process, as a pod would, instead of
        forking it from a process that imported the task modules once (the same code, run
        from the same modules; 15-20 s less per task).
      out: Where progress lines go (stdout by default).

    Raises:
      kfp_rules.SpecRefused: open-source KFP would refuse the spec.
      ValueError: the spec has no pipeline root, or a task input the driver cannot resolve.
      CompiledTaskFailed: a task's command exited non-zero; the tasks after it did not run.
    """
    out = out or sys.stdout
    spec = load_spec(spec_path)
    kfp_rules.check(spec)
    root = pipeline_root or spec.get('defaultPipelineRoot')
    if not root:
        raise ValueError(f'{spec_path}: no defaultPipelineRoot; give --pipeline-root')
    name = spec['pipelineInfo']['name']
    run = kfp_driver.RunContext(
        pipeline_name=name,
        run_id=run_id or time.strftime('run-%Y%m%d-%H%M%S-') + uuid.uuid4().hex[:6],
        pipeline_root=root,
    )
    log_dir = log_dir or os.path.join('runs', 'compiled', name, run.run_id)
    os.makedirs(log_dir, exist_ok=True)
    order = task_order(spec)
    print(
        f'asynctrain: running compiled pipeline {name!r} ({len(order)} tasks) as open-source '
        f'KFP would\n            run {run.run_id}, root {kfp_driver.run_root(run)}\n'
        f'            logs {log_dir}',
        file=out,
        flush=True,
    )
    processes = TaskProcesses(_modules(spec), log_dir, tfjob_local, fresh_processes)
    try:
        finished = _run_tasks(spec, run, order, log_dir, processes, out)
    finally:
        processes.close()
    result = CompiledRun(name, run.run_id, kfp_driver.run_root(run), log_dir, tuple(finished))
    with open(os.path.join(log_dir, 'run.json'), 'w', encoding='utf-8') as f:
        json.dump(dataclasses.asdict(result), f, indent=2)
    return result


def _run_tasks(
    spec: dict[str, Any],
    run: kfp_driver.RunContext,
    order: list[str],
    log_dir: str,
    processes: TaskProcesses,
    out: TextIO,
) -> list[TaskRun]:
    tasks = spec['root']['dag']['tasks']
    executors = spec['deploymentSpec']['executors']
    pipeline_inputs = kfp_driver.pipeline_inputs(spec)
    env = dict(os.environ)
    published: dict[str, dict[str, list[dict[str, Any]]]] = {}
    # Each task's output parameters, as the launcher publishes them from its executor output.
    output_parameters: dict[str, dict[str, Any]] = {}
    next_id = 1
    finished = []
    for index, task_name in enumerate(order, start=1):
        task = tasks[task_name]
        component = spec['components'][task['componentRef']['name']]
        executor = executors[component['executorLabel']]
        prefix = f'[{index}/{len(order)}] {task_name}'
        parameters = kfp_driver.input_parameters(
            task_name, task, component, pipeline_inputs, output_parameters, run
        )
        inputs = {
            key: published[value['taskOutputArtifact']['producerTask']][
                value['taskOutputArtifact']['outputArtifactKey']
            ]
            for key, value in task.get('inputs', {}).get('artifacts', {}).items()
        }
        task_root = kfp_driver.task_root(run, task_name)
        outputs = kfp_driver.output_artifacts(component, task_root)
        log_path = os.path.join(log_dir, f'{task_name}.log')
        if 'importer' in executor:
            merged = _import(executor['importer'], parameters, outputs)
            executor_output = {}
            seconds = 0.0
            print(f'{prefix}: imported', file=out, flush=True)
        else:
            output_file = kfp_driver.output_uri(task_root, 'output_metadata.json')
            os.makedirs(task_root, exist_ok=True)
            invocation = kfp_driver.executor_input(parameters, inputs, outputs, output_file)
            argv = _argv(executor['container'], invocation)
            task_env = {
                **env,
                **{e['name']: e['value'] for e in executor['container'].get('env', [])},
            }
            seconds = _run_task(task_name, argv, task_env, log_path, processes, out, prefix)
            executor_output = {}
            if os.path.exists(output_file):
                with open(output_file, encoding='utf-8') as f:
                    executor_output = json.load(f)
            merged = kfp_driver.merge_executor_output(outputs, executor_output)
        output_parameters[task_name] = executor_output.get('parameterValues', {})
        published[task_name] = {}
        for key, artifacts in merged.items():
            published[task_name][key] = []
            for artifact in artifacts:
                published[task_name][key].append(kfp_driver.published(artifact, next_id))
                next_id += 1
        finished.append(TaskRun(task_name, seconds, log_path, published[task_name]))
    return finished


def _import(
    importer: dict[str, Any], parameters: dict[str, Any], outputs: dict[str, list[dict[str, Any]]]
) -> dict[str, list[dict[str, Any]]]:
    """An importer task (`driver.Importer`): its one output artifact at the URI it names, a
    constant or one of the task's input parameters."""
    artifact_uri = importer.get('artifactUri', {})
    uri = (
        parameters.get(artifact_uri['runtimeParameter'])
        if 'runtimeParameter' in artifact_uri
        else artifact_uri.get('constant')
    )
    if not isinstance(uri, str) or not uri:
        raise ValueError(f'importer: artifactUri {artifact_uri} gives no URI')
    (key,) = outputs
    artifact = {
        **outputs[key][0],
        'uri': uri,
        'type': importer.get('typeSchema', outputs[key][0]['type']),
    }
    if importer.get('metadata'):
        artifact['metadata'] = importer['metadata']
    return {key: [artifact]}
