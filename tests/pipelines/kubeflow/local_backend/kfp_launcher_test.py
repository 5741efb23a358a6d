"""The launcher's staging (`kfp_launcher`) against the S3 endpoint of the tests, file by file, each
test naming the Go function (kubeflow/pipelines `backend/src/v2/`) it follows."""

from __future__ import annotations

import json
import os
import pathlib

import pytest
from google.protobuf import json_format

from asynctrain.pipelines.kubeflow.compile import compiled_pipeline
from asynctrain.pipelines.kubeflow.local_backend import kfp_driver, kfp_launcher, kfp_profiles


@pytest.fixture
def store(s3_store):
    return kfp_launcher.ObjectStore(s3_store.client())


@pytest.fixture
def bucket(s3_store) -> str:
    return s3_store.new_bucket()


def _put(s3_store, bucket: str, files: dict[str, str]) -> None:
    for key, text in files.items():
        s3_store.client().put_object(Bucket=bucket, Key=key, Body=text.encode())


def _files(folder) -> dict[str, str]:
    return {
        os.path.relpath(os.path.join(root, name), folder): pathlib.Path(root, name).read_text()
        for root, _, names in os.walk(folder)
        for name in names
    }


def test_a_pipeline_root_that_is_not_an_object_store_uri_is_refused_with_the_launchers_words():
    # component/launcher_v2.go LocalPathForURI.
    with pytest.raises(kfp_launcher.StagingRefused) as raised:
        kfp_launcher.check_pipeline_root('/data/root')
    assert str(raised.value).splitlines() == [
        'failed to generate local path for URI /data/root: unsupported storage scheme',
        kfp_launcher.ON_A_CLUSTER,
    ]
    kfp_launcher.check_pipeline_root('s3://b/root')
    kfp_launcher.check_pipeline_root('minio://b/root')
    with pytest.raises(kfp_launcher.StagingRefused, match='no GCS endpoint on this machine'):
        kfp_launcher.check_pipeline_root('gs://b/root')


def test_download_blob_writes_a_folder_recursively_and_a_file_to_the_path(
    s3_store, store, bucket, tmp_path
):
    # objectstore/object_store.go DownloadBlob: keys under the artifact's key, relative to it;
    # the key itself (a file artifact) to the local path itself.
    _put(s3_store, bucket, {'r/a/out/x.txt': 'x', 'r/a/out/sub/y.txt': 'y', 'r/a/file': 'f'})
    local = str(tmp_path / 'out')
    profile = kfp_profiles.KFP_2_17
    assert (
        kfp_launcher.download_blob(store, f's3://{bucket}/r/a/out', local, profile, str(tmp_path))
        == 2
    )
    assert _files(local) == {'x.txt': 'x', os.path.join('sub', 'y.txt'): 'y'}
    file_uri = f'minio://{bucket}/r/a/file'
    kfp_launcher.download_blob(
        store, file_uri, str(tmp_path / 'f'), kfp_profiles.KFP_2_0, str(tmp_path)
    )
    assert (tmp_path / 'f').read_text() == 'f'


def test_a_key_that_only_starts_like_the_artifacts_is_written_beside_it_until_2_17(
    s3_store, store, bucket, tmp_path
):
    # DownloadBlob lists by prefix: up to 2.16 the Trainer's `model_run/...` comes with its
    # `model` and is written to `<model>/../model_run/...`; 2.17's isBlobKeyUnderPrefix skips it.
    _put(s3_store, bucket, {'r/model/saved_model.pb': 'm', 'r/model_run/checkpoint': 'c'})
    for profile, expected in (
        (kfp_profiles.KFP_2_5, {'model/saved_model.pb': 'm', 'model_run/checkpoint': 'c'}),
        (kfp_profiles.KFP_2_17, {'model/saved_model.pb': 'm'}),
    ):
        pod = tmp_path / profile.version
        local = str(pod / 'r' / 'model')
        kfp_launcher.download_blob(store, f's3://{bucket}/r/model', local, profile, str(pod))
        assert _files(pod / 'r') == expected
    _put(s3_store, bucket, {'r/model/../escape': 'e'})
    with pytest.raises(kfp_launcher.StagingRefused, match='path traversal detected'):
        kfp_launcher.download_blob(
            store,
            f's3://{bucket}/r/model',
            str(tmp_path / 'm'),
            kfp_profiles.KFP_2_17,
            str(tmp_path),
        )


def test_upload_blob_a_folder_recursively_a_file_as_the_key_a_missing_path_tolerated(
    s3_store, store, bucket, tmp_path
):
    # objectstore/object_store.go UploadBlob; launcher_v2.go uploadOutputArtifacts lets a
    # missing local path pass ("We allow components to not produce output files").
    (tmp_path / 'out' / 'sub').mkdir(parents=True)
    (tmp_path / 'out' / 'x.txt').write_text('x')
    (tmp_path / 'out' / 'sub' / 'y.txt').write_text('y')
    (tmp_path / 'log').write_text('l')
    assert kfp_launcher.upload_blob(store, str(tmp_path / 'out'), f's3://{bucket}/r/out')
    assert kfp_launcher.upload_blob(store, str(tmp_path / 'log'), f'minio://{bucket}/r/log')
    assert not kfp_launcher.upload_blob(store, str(tmp_path / 'none'), f's3://{bucket}/r/none')
    assert s3_store.keys(f's3://{bucket}/r') == ['log', 'out/sub/y.txt', 'out/x.txt']


def _executor_input(bucket: str, inputs: dict, outputs: dict, profile) -> dict:
    component = {
        'outputDefinitions': {
            'artifacts': {
                name: {'artifactType': {'schemaTitle': 'system.Dataset'}} for name in outputs
            },
            'parameters': {'count': {'parameterType': 'NUMBER_INTEGER'}},
        }
    }
    component = json_format.ParseDict(component, compiled_pipeline.ComponentSpec())
    task_outputs = kfp_driver.outputs(component, f's3://{bucket}/root/p/r/t/u', profile)
    return json.loads(
        kfp_driver.executor_input(
            {},
            inputs,
            task_outputs['artifacts'],
            task_outputs['outputFile'],
            task_outputs['parameters'],
        )
    ), component


def test_a_pod_gets_its_inputs_and_its_output_folders_and_gives_back_its_outputs(
    s3_store, store, bucket, tmp_path
):
    _put(s3_store, bucket, {'root/p/r/up/u/examples/data.csv': 'a,b\n'})
    received = {'name': '1', 'uri': f's3://{bucket}/root/p/r/up/u/examples'}
    executor_input, component = _executor_input(
        bucket, {'examples': [received]}, {'model': None}, kfp_profiles.KFP_2_17
    )
    pod = kfp_launcher.Pod(str(tmp_path / 'pod'))
    pod.make()

    kfp_launcher.download_inputs(
        executor_input, pod, store, kfp_profiles.KFP_2_17, f's3://{bucket}/root/p/r'
    )
    kfp_launcher.prepare_output_folders(executor_input, pod)

    assert _files(tmp_path / 'pod') == {f's3/{bucket}/root/p/r/up/u/examples/data.csv': 'a,b\n'}
    # prepareOutputFolders: the parents of outputs and of parameter files, not the paths.
    assert os.path.isdir(pod.host_path(f'/s3/{bucket}/root/p/r/t/u'))
    assert not os.path.exists(pod.host_path(f'/s3/{bucket}/root/p/r/t/u/model'))
    assert os.path.isdir(pod.host_path('/tmp/kfp/outputs'))

    # What the executor writes: the model, the count as a file, no executor output file.
    model = pod.host_path(f'/s3/{bucket}/root/p/r/t/u/model')
    os.makedirs(model)
    pathlib.Path(model, 'saved_model.pb').write_text('m')
    pathlib.Path(pod.host_path('/tmp/kfp/outputs/count')).write_text(' 12\n')
    written = kfp_launcher.executor_output(executor_input, pod)
    assert written == {}  # getExecutorOutputFile: none written is not an error
    # collectOutputParameters, metadata.TextToPbValue: an integer as a number.
    assert kfp_launcher.collect_output_parameters(executor_input, written, component, pod) == {
        'count': 12.0
    }
    outputs = {k: v['artifacts'] for k, v in executor_input['outputs']['artifacts'].items()}
    recorded = kfp_launcher.upload_outputs(
        outputs, pod, store, True, kfp_profiles.KFP_2_17, f's3://{bucket}/root/p/r'
    )
    # The executor-logs file was never written: 2.16.1+ does not record it.
    assert list(recorded) == ['model']
    assert s3_store.keys(f's3://{bucket}/root/p/r/t') == ['u/model/saved_model.pb']


def test_a_missing_output_parameter_file_fails_the_task(store, bucket, tmp_path):
    executor_input, component = _executor_input(bucket, {}, {}, kfp_profiles.KFP_2_0)
    pod = kfp_launcher.Pod(str(tmp_path / 'pod'))
    pod.make()
    with pytest.raises(RuntimeError) as raised:
        kfp_launcher.collect_output_parameters(executor_input, {}, component, pod)
    assert str(raised.value).startswith(
        'failed to read output parameter name="count" type="NUMBER_INTEGER" '
        'path="/tmp/kfp/outputs/count": '
    )
    # Given in the executor output, the file is not read (it "has the highest priority").
    written = {'parameterValues': {'count': 3}}
    assert kfp_launcher.collect_output_parameters(executor_input, written, component, pod) == {
        'count': 3
    }


def test_inputs_and_outputs_outside_what_the_launcher_can_open_are_refused(store, bucket, tmp_path):
    pod = kfp_launcher.Pod(str(tmp_path / 'pod'))
    pod.make()
    local_input = {'name': '1', 'uri': '/data/examples'}
    executor_input, _ = _executor_input(
        bucket, {'examples': [local_input]}, {}, kfp_profiles.KFP_2_5
    )
    # launcher_v2.go fetchNonDefaultBuckets, objectstore ParseBucketConfigForArtifactURI.
    with pytest.raises(kfp_launcher.StagingRefused) as raised:
        kfp_launcher.download_inputs(
            executor_input, pod, store, kfp_profiles.KFP_2_5, f's3://{bucket}/root/p/r'
        )
    assert str(raised.value) == (
        'failed to fetch non default buckets: failed to parse bucketConfig for output artifact '
        '"examples" with uri "/data/examples": parse bucket config failed: unrecognized uri '
        'format: "/data/examples"'
    )
    # objectstore Config.KeyFromURI: an executor's URI outside the run's root.
    elsewhere = {'out': [{'uri': f's3://{bucket}/other/out'}]}
    with pytest.raises(kfp_launcher.StagingRefused, match='does not have expected bucket prefix'):
        kfp_launcher.upload_outputs(
            elsewhere, pod, store, True, kfp_profiles.KFP_2_5, f's3://{bucket}/root/p/r'
        )


def test_a_failed_commands_logs_are_uploaded_from_2_16_only(s3_store, store, bucket, tmp_path):
    # launcher_v2.go executeV2 -> uploadOutputArtifacts(componentSucceeded=false), 2.16.0+.
    pod = kfp_launcher.Pod(str(tmp_path / 'pod'))
    pod.make()
    for profile in (kfp_profiles.KFP_2_5, kfp_profiles.KFP_2_17):
        executor_input, _ = _executor_input(bucket, {}, {'model': None}, profile)
        outputs = {k: v['artifacts'] for k, v in executor_input['outputs']['artifacts'].items()}
        log = tmp_path / f'{profile.version}.log'
        log.write_text(f'failed on {profile.version}')
        kfp_launcher.write_executor_logs(outputs, pod, str(log))
        recorded = kfp_launcher.upload_outputs(
            outputs, pod, store, False, profile, f's3://{bucket}/root/p/r'
        )
        assert list(recorded) == (['executor-logs'] if profile.upload_logs_of_failed_task else [])
    assert s3_store.keys(f's3://{bucket}/root/p/r/t/u') == ['executor-logs-0']


def test_placeholders_of_a_task_and_the_first_element_filled_up_to_2_5(bucket):
    # launcher_v2.go getPlaceholders; executeV2 (2.5.0) fills every element,
    # compileCmdAndArgs (2.14+) drops what it filled into cmd.
    received = {'name': '1', 'uri': f's3://{bucket}/root/p/r/up/u/examples'}
    executor_input, _ = _executor_input(
        bucket, {'examples': [received]}, {'model': None}, kfp_profiles.KFP_2_17
    )
    executor_input['inputs']['parameterValues'] = {'flag': True, 'l': [1, 2], 'x': 0.5}
    found = kfp_launcher.placeholders(executor_input)
    assert {k: v for k, v in found.items() if 'executor-logs' not in k} == {
        "{{$.inputs.artifacts['examples'].uri}}": f's3://{bucket}/root/p/r/up/u/examples',
        "{{$.inputs.artifacts['examples'].path}}": f'/s3/{bucket}/root/p/r/up/u/examples',
        "{{$.outputs.artifacts['model'].uri}}": f's3://{bucket}/root/p/r/t/u/model',
        "{{$.outputs.artifacts['model'].path}}": f'/s3/{bucket}/root/p/r/t/u/model',
        "{{$.inputs.parameters['flag']}}": 'true',
        "{{$.inputs.parameters['l']}}": '[1,2]',
        "{{$.inputs.parameters['x']}}": '0.5',
        "{{$.outputs.parameters['count'].output_file}}": '/tmp/kfp/outputs/count',
    }
    container = json_format.ParseDict(
        {
            'command': ["{{$.inputs.parameters['x']}}"],
            'args': ["{{$.outputs.artifacts['model'].path}}"],
        },
        compiled_pipeline.ContainerSpec(),
    )
    model_path = f'/s3/{bucket}/root/p/r/t/u/model'
    assert kfp_launcher.command_line(container, executor_input, kfp_profiles.KFP_2_5) == [
        '0.5',
        model_path,
    ]
    assert kfp_launcher.command_line(container, executor_input, kfp_profiles.KFP_2_17) == [
        "{{$.inputs.parameters['x']}}",
        model_path,
    ]
