"""`kfp_storage`: the launcher's staging path of a URI (kubeflow/pipelines
`backend/src/v2/component/launcher_v2.go`, `LocalPathForURI`), and the local paths a compiled
spec names that a step's pod would not have."""

from __future__ import annotations

import json

import pytest
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

from asynctrain.pipelines.kubeflow.container import kfp_storage


@pytest.mark.parametrize(
    ('uri', 'path'),
    [
        ('gs://b/p/r/T/u/model', '/gcs/b/p/r/T/u/model'),
        ('minio://mlpipeline/v2/artifacts/x', '/minio/mlpipeline/v2/artifacts/x'),
        ('s3://b/k', '/s3/b/k'),
    ],
)
def test_each_object_store_scheme_is_staged_under_its_own_folder(uri, path):
    assert kfp_storage.local_path_for_uri(uri) == path
    assert kfp_storage.is_object_store_uri(uri)


@pytest.mark.parametrize('uri', ['/tmp/root/x', 'file:///tmp/x', 'hdfs://nn/x', 'S3://b/k'])
def test_any_other_uri_is_refused_with_the_launchers_message(uri):
    assert not kfp_storage.is_object_store_uri(uri)
    with pytest.raises(
        kfp_storage.UnsupportedStorageScheme,
        match=f'^failed to generate local path for URI {uri}: unsupported storage scheme$',
    ):
        kfp_storage.local_path_for_uri(uri)


def _pipeline(document: dict) -> pipeline_spec_pb2.PipelineSpec:
    return json_format.ParseDict(document, pipeline_spec_pb2.PipelineSpec())


def _task(**constants):
    return {
        'inputs': {
            'parameters': {k: {'runtimeValue': {'constant': v}} for k, v in constants.items()}
        }
    }


def test_local_input_folders_and_push_destinations_are_named_by_task_and_parameter():
    local_push = json.dumps({'filesystem': {'base_directory': '/srv/serving'}})
    remote_push = json.dumps({'filesystem': {'base_directory': 's3://b/serving'}})
    spec = {
        'root': {
            'dag': {
                'tasks': {
                    'CsvExampleGen': _task(input_base='/data/csv', input_config='{}'),
                    'Pusher': _task(push_destination=local_push, custom_config='null'),
                    'latest_blessed_model': _task(push_destination='/srv/serving'),
                    'Other': _task(push_destination=remote_push),
                    'ImportSchemaGen': _task(schema_file='/opt/asynctrain/schemas/t.pbtxt'),
                }
            }
        }
    }
    assert kfp_storage.pod_local_paths(_pipeline(spec)) == [
        'CsvExampleGen.input_base: /data/csv',
        'Pusher.push_destination: /srv/serving',
        'latest_blessed_model.push_destination: /srv/serving',
    ]
    spec['root']['dag']['tasks']['CsvExampleGen'] = _task(input_base='gs://b/csv')
    spec['root']['dag']['tasks']['Pusher'] = _task(push_destination=remote_push)
    spec['root']['dag']['tasks']['latest_blessed_model'] = _task(push_destination='s3://b/serving')
    assert kfp_storage.pod_local_paths(_pipeline(spec)) == []
