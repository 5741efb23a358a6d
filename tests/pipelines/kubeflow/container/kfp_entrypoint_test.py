"""`kfp_entrypoint`: what TFX's entrypoint is handed, from an ExecutorInput shaped as open-source
KFP's driver builds it, and what the launcher is handed back.

The ExecutorInput below is the driver's (backend/src/v2): an upstream input rebuilt from ML
Metadata with an empty type and its MLMD id as name (`metadata/converter.go`,
`toRuntimeArtifact`), an `executor-logs` output typed `system.Artifact` (`driver.go`,
`provisionOutputs`, 2.5.0 on), object-store URIs staged by the launcher at `/s3/`, `/minio/`
(`launcher_v2.go`, `LocalPathForURI`). The end-to-end runs through every profile are in
tests/e2e/compiled_run_e2e_test.py.
"""

from __future__ import annotations

import json

import pytest

from asynctrain.pipelines.kubeflow.container import kfp_entrypoint

EXAMPLES = {'instanceSchema': 'title: tfx.Examples\ntype: object\n'}
MODEL = {'instanceSchema': 'title: tfx.Model\ntype: object\n'}
INPUTS_SPEC = {
    'artifacts': {'examples': {'artifactType': EXAMPLES}},
    'parameters': {'steps': {'parameterType': 'NUMBER_INTEGER'}},
}
OUTPUTS_SPEC = {'artifacts': {'model': {'artifactType': MODEL}}}


def _driver_input(examples_uri: str, model_uri: str) -> dict:
    return {
        'inputs': {
            'parameterValues': {'steps': 10.0},
            'artifacts': {
                'examples': {
                    'artifacts': [
                        {
                            'name': '17',
                            'uri': examples_uri,
                            'type': {'instanceSchema': ''},
                            'metadata': {'span': 3, 'display_name': 'examples'},
                        }
                    ]
                }
            },
        },
        'outputs': {
            'artifacts': {
                'model': {'artifacts': [{'uri': model_uri, 'type': MODEL}]},
                'executor-logs': {
                    'artifacts': [
                        {
                            'uri': model_uri.rsplit('/', 1)[0] + '/executor-logs',
                            'type': {'schemaTitle': 'system.Artifact'},
                        }
                    ]
                },
            },
            'outputFile': '/tmp/kfp_outputs/output_metadata.json',
        },
    }


def test_types_come_from_the_components_definitions_and_kfps_own_output_is_left_out():
    given = _driver_input('s3://b/run/CsvExampleGen/u1/examples', 's3://b/run/Trainer/u2/model')

    prepared, published = kfp_entrypoint.prepare_executor_input(
        given, INPUTS_SPEC, OUTPUTS_SPEC, 'staged'
    )

    (examples,) = prepared['inputs']['artifacts']['examples']['artifacts']
    assert examples['type'] == EXAMPLES
    assert (examples['name'], examples['metadata']) == (
        '17',
        {'span': 3, 'display_name': 'examples'},
    )
    assert list(prepared['outputs']['artifacts']) == ['model']
    assert prepared['outputs']['artifacts']['model']['artifacts'][0]['type'] == MODEL
    # TFX is given the launcher's local copies; each maps back to its object-store URI.
    assert examples['uri'] == '/s3/b/run/CsvExampleGen/u1/examples'
    assert published == {
        '/s3/b/run/CsvExampleGen/u1/examples': 's3://b/run/CsvExampleGen/u1/examples',
        '/s3/b/run/Trainer/u2/model': 's3://b/run/Trainer/u2/model',
    }
    # The caller's ExecutorInput is left as it was (the launcher's view).
    assert given['inputs']['artifacts']['examples']['artifacts'][0]['type'] == {
        'instanceSchema': ''
    }
    # What TFX's own parser then makes of it: the classes the component declares.
    from google.protobuf import json_format
    from kfp.pipeline_spec import pipeline_spec_pb2
    from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_entrypoint_utils

    message = json_format.ParseDict(prepared, pipeline_spec_pb2.ExecutorInput())
    inputs = kubeflow_v2_entrypoint_utils.parse_raw_artifact_dict(message.inputs.artifacts)
    outputs = kubeflow_v2_entrypoint_utils.parse_raw_artifact_dict(message.outputs.artifacts)
    assert type(inputs['examples'][0]).__name__ == 'Examples'
    assert inputs['examples'][0].span == 3
    assert type(outputs['model'][0]).__name__ == 'Model'


def test_stock_parsing_of_the_same_input_fails_as_tfx_7768():
    """The failure this entrypoint exists for, from TFX's own parser on the driver's input."""
    from google.protobuf import json_format
    from kfp.pipeline_spec import pipeline_spec_pb2
    from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_entrypoint_utils

    given = _driver_input('s3://b/e', 's3://b/m')
    message = json_format.ParseDict(given, pipeline_spec_pb2.ExecutorInput())
    with pytest.raises(AttributeError, match="'NoneType' object has no attribute 'get'"):
        kubeflow_v2_entrypoint_utils.parse_raw_artifact_dict(message.inputs.artifacts)
    with pytest.raises(ImportError, match='system.Artifact'):
        kubeflow_v2_entrypoint_utils.parse_raw_artifact_dict(message.outputs.artifacts)


@pytest.mark.parametrize(
    ('uri', 'staged', 'object_store'),
    [
        ('minio://mlpipeline/v2/artifacts/p/r/T/u/m', '/minio/mlpipeline/v2/artifacts/p/r/T/u/m',
         's3://mlpipeline/v2/artifacts/p/r/T/u/m'),
        ('gs://b/r/m', '/gcs/b/r/m', 'gs://b/r/m'),
        ('s3://b/r/m', '/s3/b/r/m', 's3://b/r/m'),
        ('/mnt/pvc/r/m', '/mnt/pvc/r/m', '/mnt/pvc/r/m'),
    ],
)  # fmt: skip
def test_executor_uris_by_access(uri, staged, object_store):
    assert kfp_entrypoint.executor_uri(uri, 'staged') == staged
    # minio:// is no filesystem TFX or Beam knows; MinIO speaks S3.
    assert kfp_entrypoint.executor_uri(uri, 'object_store') == object_store


def test_an_input_the_component_does_not_define_is_refused_by_name():
    given = _driver_input('s3://b/e', 's3://b/m')
    given['inputs']['artifacts']['stray'] = given['inputs']['artifacts']['examples']
    with pytest.raises(ValueError, match=r"input artifact 'stray' is not one of .*\['examples'\]"):
        kfp_entrypoint.prepare_executor_input(given, INPUTS_SPEC, OUTPUTS_SPEC, 'staged')


def test_the_launcher_is_handed_object_store_uris_back_in_uris_and_metadata():
    given = _driver_input('minio://mlpipeline/r/E/u1/examples', 'minio://mlpipeline/r/T/u2/model')
    _, published = kfp_entrypoint.prepare_executor_input(given, INPUTS_SPEC, OUTPUTS_SPEC, 'staged')
    # As TFX's entrypoint writes it: the local path as URI, metadata naming local paths.
    written = {
        'artifacts': {
            'model': {
                'artifacts': [
                    {
                        'uri': '/minio/mlpipeline/r/T/u2/model',
                        'metadata': {
                            'trained_from': '/minio/mlpipeline/r/E/u1/examples/Split-train',
                            'paths': ['/minio/mlpipeline/r/T/u2/model/Format-Serving'],
                            'near_miss': '/minio/mlpipeline/r/T/u2/model2',
                            'steps': 10.0,
                        },
                    }
                ]
            }
        }
    }

    result = kfp_entrypoint.publish_executor_output(
        written, given['outputs']['artifacts'], published
    )

    (model,) = result['artifacts']['model']['artifacts']
    assert model['uri'] == 'minio://mlpipeline/r/T/u2/model'
    assert model['metadata'] == {
        'trained_from': 'minio://mlpipeline/r/E/u1/examples/Split-train',
        'paths': ['minio://mlpipeline/r/T/u2/model/Format-Serving'],
        # A sibling path that only shares a prefix is not the artifact's.
        'near_miss': '/minio/mlpipeline/r/T/u2/model2',
        'steps': 10.0,
    }
    assert json.dumps(written).count('/minio/') == 4  # the executor's own output is untouched
