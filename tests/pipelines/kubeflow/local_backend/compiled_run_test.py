"""`compiled_run` on small hand-written specs, on the S3 endpoint of the tests: the order tasks run
in, the command a container task runs, what a downstream task receives through the object store,
each task in a pod of its own, and a failing task named with its log."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from google.protobuf import json_format

from asynctrain import cli
from asynctrain.pipelines.kubeflow.compile import compiled_pipeline
from asynctrain.pipelines.kubeflow.local_backend import compiled_run, kfp_cluster, kfp_profiles

TYPE = {'instanceSchema': 'title: tfx.Examples\ntype: object\n'}
# Lists the files it finds under /s3, writes that and its ExecutorInput into its `out` artifact's
# local path (uploaded by the launcher), writes an executor output that moves `out`'s metadata and an
# output parameter `count` on, leaves a file at /s3/leftover (never uploaded), exits argv[2].
WRITER = """
import json, os, sys
x = json.loads(sys.argv[1])
seen = sorted(os.path.join(r, f) for r, _, fs in os.walk('/s3') for f in fs)
out = x['outputs']['artifacts']['out']['artifacts'][0]
path = '/' + out['uri'].replace('://', '/', 1)
os.makedirs(path, exist_ok=True)
open(os.path.join(path, 'input.json'), 'w').write(sys.argv[1])
pod = {k: os.environ[k] for k in ('KFP_POD_NAME', 'KFP_POD_UID')}
open(os.path.join(path, 'pod.json'), 'w').write(json.dumps(pod))
open(os.path.join(path, 'seen.json'), 'w').write(json.dumps(seen))
open('/s3/leftover', 'w').write('not uploaded')
os.makedirs(os.path.dirname(x['outputs']['outputFile']), exist_ok=True)
open(x['outputs']['outputFile'], 'w').write(json.dumps({
    'artifacts': {'out': {'artifacts': [{'metadata': {'rows': 3, 'ok': True}}]}},
    'parameterValues': {'count': 7},
}))
print('task log line')
sys.exit(int(sys.argv[2]))
"""


def _task(producer=None):
    task = {'componentRef': {'name': 'c'}, 'inputs': {'parameters': {}}}
    task['inputs']['parameters']['n'] = {'runtimeValue': {'constant': 2.0}}
    if producer:
        task['inputs']['artifacts'] = {
            'examples': {
                'taskOutputArtifact': {'producerTask': producer, 'outputArtifactKey': 'out'}
            }
        }
    return task


def _spec(tasks: dict, code: int = 0, command: list | None = None) -> dict:
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
                        'command': command or ['python', '-c', WRITER],
                        'args': ['{{$}}', str(code)],
                    }
                }
            }
        },
        'root': {'dag': {'tasks': tasks}},
    }


def _read(store, uri: str) -> str:
    bucket, _, key = uri.partition('://')[2].partition('/')
    return store.client().get_object(Bucket=bucket, Key=key)['Body'].read().decode()


def test_python_is_this_interpreter_and_the_launchers_placeholders_are_filled():
    executor_input = {
        'inputs': {'parameterValues': {'n': 2.0}},
        'outputs': {'outputFile': '/tmp/kfp_outputs/output_metadata.json'},
    }
    container = json_format.ParseDict(
        {
            'command': ['python', '-m', 'mod'],
            'args': [
                '--x',
                '{{$}}',
                "--n={{$.inputs.parameters['n']}}",
                "{{$.inputs.parameters['m']}}",
            ],
        },
        compiled_pipeline.ContainerSpec(),
    )
    assert compiled_run._argv(container, executor_input, kfp_profiles.KFP_2_17) == [
        sys.executable,
        '-m',
        'mod',
        '--x',
        json.dumps(executor_input, separators=(',', ':')),
        '--n=2',
        "{{$.inputs.parameters['m']}}",  # no such input: left as written
    ]


@pytest.mark.parametrize('fresh', [False, True], ids=['forked', 'fresh-processes'])
def test_a_downstream_task_receives_the_published_artifact_through_the_store(
    s3_store, tmp_path, fresh
):
    bucket = s3_store.new_bucket()
    path = tmp_path / 'spec.json'
    consumer = _task('a')
    consumer['inputs']['parameters']['count'] = {
        'taskOutputParameter': {'producerTask': 'a', 'outputParameterKey': 'count'}
    }
    path.write_text(json.dumps(_spec({'a': _task(), 'b': consumer})))

    run = compiled_run.run_compiled(
        str(path),
        pipeline_root=f's3://{bucket}/root',
        run_id='r',
        log_dir=str(tmp_path / 'logs'),
        fresh_processes=fresh,
    )

    produced = run.artifact('a', 'out')
    assert produced['name'] == '2'  # ML Metadata's id: `executor-logs` was recorded first
    assert produced['uri'].startswith(f's3://{bucket}/root/p/r/a/')
    assert produced['uri'].endswith('/out')
    # Through ML Metadata: no type schema, the executor's metadata in its value types, and the
    # custom properties RecordArtifact adds.
    assert produced['type'] == {'instanceSchema': ''}
    assert produced['metadata']['rows'] == 3
    assert produced['metadata']['ok'] == 1
    assert produced['metadata']['display_name'] == 'out'
    received_uri = run.artifact('b', 'out')['uri'] + '/input.json'
    received = json.loads(_read(s3_store, received_uri))
    assert received['inputs']['artifacts']['examples']['artifacts'] == [produced]
    # A constant, and the producer's output parameter from its executor output.
    assert received['inputs']['parameterValues'] == {'n': 2.0, 'count': 7}
    # The consumer's pod held the producer's output as the launcher downloaded it, and no
    # file the producer left in its own /s3 without uploading it.
    seen = json.loads(_read(s3_store, run.artifact('b', 'out')['uri'] + '/seen.json'))
    local_input = '/s3/' + produced['uri'].removeprefix('s3://')
    assert seen == [
        f'{local_input}/input.json',
        f'{local_input}/pod.json',
        f'{local_input}/seen.json',
    ]
    # The pod's own environment (argocompiler/common.go commonEnvs): Argo's pod names start
    # with the workflow's name (argo.go GenerateName: the pipeline's name and five characters).
    pod = json.loads(_read(s3_store, run.artifact('b', 'out')['uri'] + '/pod.json'))
    assert re.fullmatch(
        r'p-[bcdfghjklmnpqrstvwxz2456789]{5}-system-container-impl-\d+', pod['KFP_POD_NAME']
    )
    assert re.fullmatch(r'[0-9a-f-]{36}', pod['KFP_POD_UID'])
    # The launcher uploaded each output's local path and the task's log as executor-logs.
    assert 'task log line' in _read(s3_store, run.artifact('b', 'executor-logs')['uri'])
    assert 'task log line' in (tmp_path / 'logs' / 'b.log').read_text()
    assert json.loads((tmp_path / 'logs' / 'run.json').read_text())['kfp_version'] == '2.17'


def test_on_2_0_outputs_have_no_salt_and_no_logs_artifact(s3_store, tmp_path):
    bucket = s3_store.new_bucket()
    path = tmp_path / 'spec.json'
    path.write_text(json.dumps(_spec({'a': _task(), 'b': _task('a')})))

    run = compiled_run.run_compiled(
        str(path),
        pipeline_root=f'minio://{bucket}/root',
        run_id='r',
        log_dir=str(tmp_path / 'logs'),
        kfp_version='2.0',
    )

    assert run.artifact('a', 'out')['uri'] == f'minio://{bucket}/root/p/r/a/out'
    assert set(run.tasks[0].outputs) == {'out'}
    assert 'store_session_info' not in run.artifact('a', 'out')['metadata']
    # minio://B/K is bucket B of the one S3 endpoint.
    assert s3_store.keys(f's3://{bucket}/root') == [
        'p/r/a/out/input.json',
        'p/r/a/out/pod.json',
        'p/r/a/out/seen.json',
        'p/r/b/out/input.json',
        'p/r/b/out/pod.json',
        'p/r/b/out/seen.json',
    ]
    received = json.loads(_read(s3_store, f's3://{bucket}/root/p/r/b/out/input.json'))
    assert received['outputs']['outputFile'] == '/tmp/kfp_outputs/output_metadata.json'


def test_a_failing_task_is_named_with_its_log_and_stops_the_run(s3_store, tmp_path):
    bucket = s3_store.new_bucket()
    path = tmp_path / 'spec.json'
    path.write_text(json.dumps(_spec({'a': _task(), 'b': _task('a')}, code=3)))

    with pytest.raises(compiled_run.CompiledTaskFailed) as raised:
        compiled_run.run_compiled(
            str(path),
            pipeline_root=f's3://{bucket}/root',
            run_id='r',
            log_dir=str(tmp_path / 'logs'),
        )

    assert (raised.value.task, raised.value.returncode) == ('a', 3)
    assert raised.value.log_path == str(tmp_path / 'logs' / 'a.log')
    assert str(raised.value) == 'task a failed (exit status 3)'
    assert not (tmp_path / 'logs' / 'b.log').exists()
    # 2.16+: a failed command's executor-logs, and only it, are uploaded.
    (logs,) = s3_store.keys(f's3://{bucket}/root')
    assert logs.startswith('p/r/a/') and logs.endswith('/executor-logs-0')


def test_the_exit_status_is_the_codes_even_when_the_process_aborts_at_exit(
    s3_store, tmp_path, monkeypatch
):
    # What tensorflow-io's S3 file system does when the interpreter shuts down, in a module run
    # as `python -m`, as every compiled step is.
    # (The runner imports a step's module once before any task, as every step module allows.)
    (tmp_path / 'aborting_task.py').write_text(
        'import atexit, os, sys\n'
        "if __name__ == '__main__':\n"
        '    atexit.register(os.abort)\n'
        "    print('worked')\n"
        '    sys.exit(int(sys.argv[2]))\n'
    )
    monkeypatch.setenv('PYTHONPATH', str(tmp_path))
    bucket = s3_store.new_bucket()
    path = tmp_path / 'spec.json'
    path.write_text(json.dumps(_spec({'a': _task()}, command=['python', '-m', 'aborting_task'])))
    for fresh in (False, True):
        run = compiled_run.run_compiled(
            str(path),
            pipeline_root=f's3://{bucket}/root',
            log_dir=str(tmp_path / f'logs-{fresh}'),
            fresh_processes=fresh,
        )
        assert [t.name for t in run.tasks] == ['a']
        assert 'worked' in (tmp_path / f'logs-{fresh}' / 'a.log').read_text()


@pytest.mark.parametrize('root', ['/tmp/root', 'file:///tmp/root', 'hdfs://nn/root'])
def test_a_root_the_launcher_cannot_stage_is_refused_before_any_task(tmp_path, capsys, root):
    path = tmp_path / 'spec.json'
    path.write_text(json.dumps(_spec({'a': _task()})))

    code = cli.main(['run', '--compiled', str(path), '--pipeline-root', root])

    assert code == 2
    printed = capsys.readouterr().err
    assert f'failed to generate local path for URI {root}: unsupported storage scheme' in printed
    assert 'stays in its pod' in printed


def test_the_command_line_names_the_run_and_its_workflow(s3_store, tmp_path, capsys):
    bucket = s3_store.new_bucket()
    path = tmp_path / 'spec.json'
    path.write_text(json.dumps(_spec({'a': _task()})))

    code = cli.main(
        [
            'run',
            '--compiled',
            str(path),
            '--pipeline-root',
            f's3://{bucket}/root',
            '--run-id',
            'r1',
            '--run-name',
            'nightly taxi',
        ]
    )

    assert code == 0
    # The display name as given, the workflow named after the pipeline (`<pipeline>-<5>`).
    assert re.search(r"run r1 \('nightly taxi', workflow p-[a-z0-9]{5}\)", capsys.readouterr().out)


def test_gs_is_refused_for_want_of_an_endpoint(tmp_path):
    path = tmp_path / 'spec.json'
    path.write_text(json.dumps(_spec({'a': _task()})))
    with pytest.raises(ValueError, match='gs:// is not served here'):
        compiled_run.run_compiled(str(path), pipeline_root='gs://b/root')


def test_an_unknown_kfp_version_is_refused_naming_the_lines(tmp_path, capsys):
    path = tmp_path / 'spec.json'
    path.write_text(json.dumps(_spec({'a': _task()})))
    with pytest.raises(SystemExit):
        cli.main(['run', '--compiled', str(path), '--kfp-version', '2.3'])
    # Python 3.10's argparse lists the choices with repr() (quoted), 3.13's with str() (Lib/
    # argparse.py, _check_value: `', '.join(map(str, action.choices))`): the three lines in order.
    assert re.search(
        r"invalid choice: '2\.3' \(choose from '?2\.0'?, '?2\.5'?, '?2\.17'?\)\n",
        capsys.readouterr().err,
    )


def test_without_root_a_run_is_refused_saying_why_never_run_on_shared_paths():
    # A process that may not make a mount namespace (here: this interpreter turned into
    # `nobody` after its imports).
    script = (
        'import os\n'
        'from asynctrain.pipelines.kubeflow.local_backend import compiled_task\n'
        'os.setgid(65534); os.setuid(65534)\n'
        'try:\n'
        '    compiled_task.check_pods()\n'
        'except compiled_task.PodUnavailable as e:\n'
        '    print(e.strerror)\n'
    )
    printed = subprocess.run(
        [sys.executable, '-c', script], capture_output=True, text=True, check=True
    ).stdout
    assert printed.startswith('unshare: Operation not permitted (needs root or CAP_SYS_ADMIN)')
    assert 'each task needs its own /gcs, /s3, /minio and /tmp/kfp_outputs, as a pod has' in printed


def test_an_output_the_executor_moved_off_the_store_fails_its_consumer_in_the_launcher(
    s3_store, tmp_path
):
    # The executor output names a local folder as the URI: the launcher merges it
    # (mergeRuntimeArtifacts), cannot upload it ("Skipping uploading to remote storage") and
    # records it; the consumer's launcher cannot open a bucket for it (fetchNonDefaultBuckets).
    moves = (
        'import json, sys; x = json.loads(sys.argv[1]); '
        "open(x['outputs']['outputFile'], 'w').write(json.dumps("
        "{'artifacts': {'out': {'artifacts': [{'uri': '/data/out'}]}}}))"
    )
    bucket = s3_store.new_bucket()
    path = tmp_path / 'spec.json'
    path.write_text(
        json.dumps(_spec({'a': _task(), 'b': _task('a')}, command=['python', '-c', moves]))
    )

    with pytest.raises(compiled_run.CompiledTaskFailed) as raised:
        compiled_run.run_compiled(
            str(path),
            pipeline_root=f's3://{bucket}/root',
            run_id='r',
            log_dir=str(tmp_path / 'logs'),
            kfp_version='2.0',
        )

    assert (raised.value.task, raised.value.returncode) == ('b', 1)
    assert (tmp_path / 'logs' / 'b.log').read_text() == (
        'launcher: failed to execute component: failed to fetch non default buckets: failed to '
        'parse bucketConfig for output artifact "examples" with uri "/data/out": parse bucket '
        'config failed: unrecognized uri format: "/data/out"\n'
    )


def test_tasks_side_by_side_each_see_their_own_pod_paths(tmp_path):
    # Two task processes at once (as two test workers' runs would be) write the same pod path
    # and read it back after both wrote.
    check = (
        'import pathlib, sys, time; p = pathlib.Path("/s3/b/shared.txt"); '
        'p.parent.mkdir(parents=True, exist_ok=True); p.write_text(sys.argv[1]); time.sleep(2); '
        'print(p.read_text(), sorted(x.name for x in pathlib.Path("/s3/b").iterdir()))'
    )
    processes = []
    for name in ('one', 'two'):
        request = {
            'argv': ['-c', check, name],
            'env': dict(os.environ),
            'log_path': str(tmp_path / f'{name}.log'),
            'pod_root': str(tmp_path / f'pod-{name}'),
        }
        processes.append(
            subprocess.Popen(
                [
                    sys.executable,
                    '-m',
                    'asynctrain.pipelines.kubeflow.local_backend.compiled_task',
                    '--run',
                    json.dumps(request),
                ]
            )
        )
    assert [p.wait() for p in processes] == [0, 0]
    for name in ('one', 'two'):
        assert (tmp_path / f'{name}.log').read_text() == f"{name} ['shared.txt']\n"
        assert (tmp_path / f'pod-{name}' / 's3' / 'b' / 'shared.txt').read_text() == name
    assert not os.path.exists('/s3/b/shared.txt')


def test_a_cached_task_reuses_the_earlier_execution_and_its_consumers_follow(s3_store, tmp_path):
    """KFP's cache (`kfp_cache`): a task with the cache on whose key an earlier run of the same
    pipeline recorded does not run and publishes that execution's artifacts, ids included, so a
    consumer with the cache on hits too; a task with the cache off runs every time and gives its
    consumers new ids, so they run again."""
    bucket = s3_store.new_bucket()
    cached = {'cachingOptions': {'enableCache': True}}
    path = tmp_path / 'spec.json'
    path.write_text(json.dumps(_spec({'a': {**_task(), **cached}, 'b': {**_task('a'), **cached}})))
    metadata = str(tmp_path / 'metadata.json')

    def run(run_id: str, pipeline_file=path):
        return compiled_run.run_compiled(
            str(pipeline_file),
            pipeline_root=f's3://{bucket}/root',
            run_id=run_id,
            log_dir=str(tmp_path / run_id),
            metadata_path=metadata,
        )

    first = run('r1')
    second = run('r2')

    assert second.tasks == tuple(
        compiled_run.TaskRun(t.name, 0.0, str(tmp_path / 'r2' / f'{t.name}.log'), t.outputs)
        for t in first.tasks
    )
    assert second.artifact('b', 'out')['uri'].startswith(f's3://{bucket}/root/p/r1/b/')
    assert not os.path.exists(tmp_path / 'r2' / 'b.log')  # never launched
    # The producer's cache off: it runs, its artifacts get new ids, so its consumer runs too.
    spec = json.loads(path.read_text())
    del spec['root']['dag']['tasks']['a']['cachingOptions']
    uncached = tmp_path / 'uncached.json'
    uncached.write_text(json.dumps(spec))
    third = run('r3', uncached)
    assert third.artifact('a', 'out')['uri'].startswith(f's3://{bucket}/root/p/r3/a/')
    assert third.artifact('b', 'out')['uri'].startswith(f's3://{bucket}/root/p/r3/b/')
    ids = [
        int(a['name'])
        for r in (first, third)
        for t in r.tasks
        for v in t.outputs.values()
        for a in v
    ]
    assert len(set(ids)) == len(ids)  # ML Metadata never gives an id twice


@pytest.mark.parametrize('version', ['2.5', '2.17'])
def test_a_kfp_launcher_provider_entry_opens_the_store_and_is_recorded_on_each_artifact(
    s3_store, tmp_path, version
):
    # env.go GetStoreSessionInfo from the kfp-launcher ConfigMap's providers (2.2+): the
    # launcher reaches the entry's endpoint with the Secret it names, and RecordArtifact
    # stores that session info on every output.
    bucket = s3_store.new_bucket()
    keys = s3_store.environment()
    providers = (
        'minio:\n  default:\n    endpoint: store.team.svc:9000\n    region: eu\n'
        '    credentials:\n      fromEnv: false\n      secretRef:\n'
        '        secretName: team-store\n        accessKeyKey: id\n        secretKeyKey: key\n'
    )
    cluster = kfp_cluster.Cluster(
        launcher_config={'providers': providers},
        secrets={
            'team-store': {'id': keys['AWS_ACCESS_KEY_ID'], 'key': keys['AWS_SECRET_ACCESS_KEY']}
        },
        addresses={'store.team.svc:9000': s3_store.endpoint},
    )
    path = tmp_path / 'spec.json'
    path.write_text(json.dumps(_spec({'a': _task(), 'b': _task('a')})))

    run = compiled_run.run_compiled(
        str(path),
        pipeline_root=f'minio://{bucket}/root',
        run_id='r',
        log_dir=str(tmp_path / 'logs'),
        kfp_version=version,
        cluster=cluster,
    )

    for task in ('a', 'b'):
        session = json.loads(run.artifact(task, 'out')['metadata']['store_session_info'])
        assert session['Provider'] == 'minio'
        assert session['Params']['endpoint'] == 'store.team.svc:9000'
        assert session['Params']['secretName'] == 'team-store'
        assert ('maxRetries' in session['Params']) == (version == '2.17')
    # What task a wrote is in the store behind the entry's endpoint.
    uri = run.artifact('a', 'out')['uri'].replace('minio://', 's3://', 1)
    assert s3_store.keys(uri)


# Writes into its `out` artifact the endpoint its own environment names and the arguments it got.
STEP_VIEW = """
import json, os, sys
x = json.loads(sys.argv[1])
out = x['outputs']['artifacts']['out']['artifacts'][0]
path = '/' + out['uri'].replace('://', '/', 1)
os.makedirs(path, exist_ok=True)
open(os.path.join(path, 'view.json'), 'w').write(json.dumps(
    {'endpoint': os.environ['AWS_ENDPOINT_URL'], 'argv': sys.argv[2:]}))
"""


@pytest.mark.parametrize('version', list(kfp_profiles.PROFILES))
def test_the_launcher_reaches_a_minio_root_through_its_cluster_not_the_steps_environment(
    s3_store, tmp_path, monkeypatch, version
):
    # The launcher's endpoint and keys (kfp_cluster: the line's default address, the
    # mlpipeline-minio-artifact Secret) serve the store; the step's environment names a dead
    # endpoint and other keys, which the launcher never reads.
    profile = kfp_profiles.profile(version)
    monkeypatch.setenv('AWS_ENDPOINT_URL', 'http://127.0.0.1:1')
    monkeypatch.setenv('AWS_ACCESS_KEY_ID', 'step-key')
    bucket = s3_store.new_bucket()
    keys = s3_store.environment()
    cluster = kfp_cluster.Cluster(
        secrets={
            'mlpipeline-minio-artifact': {
                'accesskey': keys['AWS_ACCESS_KEY_ID'],
                'secretkey': keys['AWS_SECRET_ACCESS_KEY'],
            }
        },
        addresses={profile.minio_default_endpoint: s3_store.endpoint},
    )
    task = _task()
    for name, constant in (
        ('job', '{{$.pipeline_job_name}}'),
        ('wf', '{{$.pipeline_job_resource_name}}'),
    ):
        task['inputs']['parameters'][name] = {'runtimeValue': {'constant': constant}}
    spec = _spec({'a': task}, command=['python', '-c', STEP_VIEW])
    spec['components']['c']['inputDefinitions']['parameters'].update(
        job={'parameterType': 'STRING'}, wf={'parameterType': 'STRING'}
    )
    if_present = (
        '{"IfPresent": {"InputName": "n", "Then": ["--n", "{{$.inputs.parameters[\'n\']}}"]}}'
    )
    spec['deploymentSpec']['executors']['e']['container']['args'] = [
        '{{$}}',
        if_present,
        "{{$.inputs.parameters['job']}}",
        "{{$.inputs.parameters['wf']}}",
    ]
    path = tmp_path / 'spec.json'
    path.write_text(json.dumps(spec))

    run = compiled_run.run_compiled(
        str(path),
        pipeline_root=f'minio://{bucket}/root',
        run_id='r',
        log_dir=str(tmp_path / 'logs'),
        kfp_version=version,
        run_name='nightly taxi',
        cluster=cluster,
    )

    uri = run.artifact('a', 'out')['uri'].replace('minio://', 's3://', 1)
    view = json.loads(_read(s3_store, uri + '/view.json'))
    assert view['endpoint'] == 'http://127.0.0.1:1'
    # 2.17's driver resolves IfPresent and fills the parameter (resolveContainerArgs); before,
    # the clause reaches the launcher as compiled, which only fills the placeholder inside it.
    unresolved = '{"IfPresent": {"InputName": "n", "Then": ["--n", "2"]}}'
    *arguments, job, workflow = view['argv']
    assert arguments == (['--n', '2'] if version == '2.17' else [unresolved])
    # The run's display name and its workflow's name (resolveInputParameter); 2.0.5 resolves
    # no run placeholder.
    if version == '2.0':
        assert (job, workflow) == ('{{$.pipeline_job_name}}', '{{$.pipeline_job_resource_name}}')
    else:
        assert job == 'nightly taxi'
        assert re.fullmatch(r'p-[bcdfghjklmnpqrstvwxz2456789]{5}', workflow)
