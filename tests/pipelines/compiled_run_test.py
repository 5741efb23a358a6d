"""`compiled_run` on small hand-written specs: the order tasks run in, the command a container
task runs, what a downstream task receives, and a failing task named with its log."""

from __future__ import annotations

import json
import sys

import pytest

from pipelines import compiled_run

TYPE = {'instanceSchema': 'title: tfx.Examples\ntype: object\n'}
# Writes its ExecutorInput to <outputFile dir>/input.json and an executor output that moves the
# `out` artifact's metadata and an output parameter `count` on; exits with argv[2].
WRITER = (
    'import json, os, sys; x = json.loads(sys.argv[1]); d = os.path.dirname(x["outputs"]["outputFile"]);'
    'open(os.path.join(d, "input.json"), "w").write(sys.argv[1]);'
    'outs = x["outputs"]["artifacts"];'
    'open(x["outputs"]["outputFile"], "w").write(json.dumps({"artifacts": {k: {"artifacts": '
    '[{"metadata": {"rows": 3, "ok": True}}]} for k in outs}, "parameterValues": {"count": 7}}));'
    'print("task log line"); sys.exit(int(sys.argv[2]))'
)


def _task(producer=None, code=0):
    task = {'componentRef': {'name': 'c'}, 'inputs': {'parameters': {}}}
    task['inputs']['parameters']['n'] = {'runtimeValue': {'constant': 2.0}}
    if producer:
        task['inputs']['artifacts'] = {
            'examples': {
                'taskOutputArtifact': {'producerTask': producer, 'outputArtifactKey': 'out'}
            }
        }
    return task


def _spec(tasks: dict, code: int = 0) -> dict:
    return {
        'schemaVersion': '2.1.0',
        'pipelineInfo': {'name': 'p'},
        'components': {
            'c': {
                'executorLabel': 'e',
                'inputDefinitions': {'parameters': {'n': {'parameterType': 'NUMBER_DOUBLE'}}},
                'outputDefinitions': {'artifacts': {'out': {'artifactType': TYPE}}},
            }
        },
        'deploymentSpec': {
            'executors': {
                'e': {
                    'container': {
                        'image': 'unused:1',
                        'command': ['python', '-c', WRITER],
                        'args': ['{{$}}', str(code)],
                    }
                }
            }
        },
        'root': {'dag': {'tasks': tasks}},
    }


def test_tasks_run_after_their_producers_ties_by_name():
    spec = _spec({'d': _task('b'), 'b': _task('a'), 'c': _task('a'), 'a': _task()})
    spec['root']['dag']['tasks']['c']['dependentTasks'] = ['d']
    assert compiled_run.task_order(spec) == ['a', 'b', 'd', 'c']


def test_python_is_this_interpreter_and_only_the_whole_input_placeholder_runs():
    container = {'command': ['python', '-m', 'mod'], 'args': ['--x', '{{$}}']}
    assert compiled_run._argv(container, '{"i": 1}') == [
        sys.executable,
        '-m',
        'mod',
        '--x',
        '{"i": 1}',
    ]
    with pytest.raises(ValueError, match=r"inputs.parameters\['n'\]"):
        compiled_run._argv({'command': ['python'], 'args': ["{{$.inputs.parameters['n']}}"]}, '')


def test_a_downstream_task_receives_the_published_artifact(tmp_path):
    path = tmp_path / 'spec.json'
    consumer = _task('a')
    consumer['inputs']['parameters']['count'] = {
        'taskOutputParameter': {'producerTask': 'a', 'outputParameterKey': 'count'}
    }
    path.write_text(json.dumps(_spec({'a': _task(), 'b': consumer})))

    run = compiled_run.run_compiled(
        str(path), pipeline_root=str(tmp_path / 'root'), run_id='r', log_dir=str(tmp_path / 'logs')
    )

    produced = run.artifact('a', 'out')
    assert produced['name'] == '1'
    assert produced['uri'].startswith(f'{tmp_path}/root/p/r/a/') and produced['uri'].endswith(
        '/out'
    )
    # The executor's metadata merged over the driver's, through ML Metadata's types.
    assert produced['metadata'] == {'rows': 3, 'ok': 1}
    (received_file,) = (tmp_path / 'root' / 'p' / 'r' / 'b').glob('*/input.json')
    received = json.loads(received_file.read_text())
    assert received['inputs']['artifacts']['examples']['artifacts'] == [produced]
    # A constant, and the producer's output parameter from its executor output.
    assert received['inputs']['parameterValues'] == {'n': 2.0, 'count': 7}
    assert 'task log line' in (tmp_path / 'logs' / 'b.log').read_text()
    assert json.loads((tmp_path / 'logs' / 'run.json').read_text())['run_root'] == run.run_root


def test_a_failing_task_is_named_with_its_log_and_stops_the_run(tmp_path):
    spec = _spec({'a': _task(), 'b': _task('a')}, code=3)
    path = tmp_path / 'spec.json'
    path.write_text(json.dumps(spec))

    with pytest.raises(compiled_run.CompiledTaskFailed) as raised:
        compiled_run.run_compiled(
            str(path), pipeline_root=str(tmp_path / 'root'), log_dir=str(tmp_path / 'logs')
        )

    assert (raised.value.task, raised.value.returncode) == ('a', 3)
    assert raised.value.log_path == str(tmp_path / 'logs' / 'a.log')
    assert str(raised.value) == 'task a failed (exit status 3)'
    assert not (tmp_path / 'logs' / 'b.log').exists()
