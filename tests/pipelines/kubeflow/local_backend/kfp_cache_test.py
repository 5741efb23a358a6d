"""`kfp_cache`: the cache key as the driver builds it (kubeflow/pipelines
`backend/src/v2/cacheutils/cache.go`, `GenerateCacheKey`; `driver/driver.go`, `getFingerPrint`),
the store of ids and executions that runs share, and an output as ML Metadata hands it on."""

from __future__ import annotations

import copy
import json

import pytest
from google.protobuf import json_format

from asynctrain.pipelines.kubeflow.compile import compiled_pipeline
from asynctrain.pipelines.kubeflow.local_backend import kfp_cache, kfp_cluster, kfp_profiles

COMPONENT = json_format.ParseDict(
    {'outputDefinitions': {'parameters': {'count': {'parameterType': 'NUMBER_INTEGER'}}}},
    compiled_pipeline.ComponentSpec(),
)
CONTAINER = {'image': 'r/asynctrain:1', 'command': ['python', '-m', 'm'], 'args': ['{{$}}']}
EXAMPLES_TYPE = {'instanceSchema': 'title: tfx.Examples\ntype: object\n'}
EXECUTOR_INPUT = {
    'inputs': {
        'parameterValues': {'n': 2.0},
        'artifacts': {'examples': {'artifacts': [{'name': '17', 'uri': 's3://b/r1/E/examples'}]}},
    },
    'outputs': {
        'artifacts': {
            'model': {'artifacts': [{'uri': 's3://b/r1/T/u1/model', 'type': {'schemaTitle': 'x'}}]}
        },
        'parameters': {'count': {'outputFile': '/tmp/kfp/outputs/count'}},
        'outputFile': '/tmp/kfp_outputs/output_metadata.json',
    },
}


def _key(change=None, container=CONTAINER):
    executor_input = copy.deepcopy(EXECUTOR_INPUT)
    if change:
        change(executor_input)
    return kfp_cache.fingerprint(
        executor_input,
        COMPONENT,
        json_format.ParseDict(container, compiled_pipeline.ContainerSpec()),
    )


def test_the_key_ignores_uris_and_follows_everything_else():
    base = _key()

    def new_output_uri(x):
        x['outputs']['artifacts']['model']['artifacts'][0]['uri'] = 's3://b/r2/T/u9/model'

    def same_input_at_another_uri(x):
        x['inputs']['artifacts']['examples']['artifacts'][0]['uri'] = 's3://b/r2/E/examples'

    def new_input_id(x):
        x['inputs']['artifacts']['examples']['artifacts'][0]['name'] = '18'

    def new_parameter(x):
        x['inputs']['parameterValues']['n'] = 3.0

    assert _key(new_output_uri) == base
    assert _key(same_input_at_another_uri) == base  # an input counts by its id alone
    assert _key(new_input_id) != base
    assert _key(new_parameter) != base
    assert _key(container={**CONTAINER, 'image': 'r/asynctrain:2'}) != base
    assert _key(container={**CONTAINER, 'args': ['{{$}}', '--x']}) != base


def test_ids_and_executions_outlive_a_run_and_stay_within_their_pipeline(tmp_path):
    path = str(tmp_path / 'metadata.json')
    outputs = {'model': [{'name': '1', 'uri': 's3://b/m'}]}
    with kfp_cache.metadata_store(path) as store:
        assert (store.new_id(), store.new_id()) == (1, 2)
        store.record('p', 'k', outputs, {'count': 3})
    with kfp_cache.metadata_store(path) as store:
        assert store.new_id() == 3
        assert store.cached('p', 'k') == {'outputs': outputs, 'parameters': {'count': 3}}
        assert store.cached('other-pipeline', 'k') is None
        assert store.cached('p', 'other-key') is None


def test_a_consumer_receives_the_artifact_as_ml_metadata_rebuilds_it():
    # GetOutputArtifactsByExecutionId: Schema "" ("TODO(Bobgy): figure out how to get
    # schema"); ToRuntimeArtifact: InstanceSchema{""}; toRuntimeArtifact: name = the id;
    # toMLMDArtifact: bool -> int, list/struct wrapped; RecordArtifact adds display_name and,
    # from 2.2, store_session_info.
    produced = {
        'name': 'blessing',
        'uri': 's3://b/root/taxi/run-1/Evaluator/u/blessing',
        'type': EXAMPLES_TYPE,
        'metadata': {'blessed': 1, 'ok': True, 'splits': ['a'], 'm': {'x': 1}},
    }
    assert kfp_cache.published(produced, 12, 'blessing', kfp_profiles.KFP_2_0) == {
        'name': '12',
        'uri': 's3://b/root/taxi/run-1/Evaluator/u/blessing',
        'type': {'instanceSchema': ''},
        'metadata': {
            'blessed': 1,
            'ok': 1,
            'splits': {'list': ['a']},
            'm': {'struct': {'x': 1}},
            'display_name': 'blessing',
        },
    }
    received = kfp_cache.published(produced, 12, 'blessing', kfp_profiles.KFP_2_17)
    assert received['type'] == {'instanceSchema': ''}
    assert json.loads(received['metadata']['store_session_info']) == {
        'Provider': 's3',
        'Params': {'fromEnv': 'true'},
    }
    with pytest.raises(ValueError, match='unknown/unsupported value type'):
        kfp_cache.published({**produced, 'metadata': {'none': None}}, 13, 'blessing')


def test_a_minio_root_records_the_default_minio_session_of_its_line():
    # config/env.go getDefaultMinioSessionInfo: the keys from the mlpipeline-minio-artifact
    # Secret (fromEnv false), the endpoint minio-service up to 2.15 and seaweedfs from 2.16,
    # maxRetries from 2.15; Go's json.Marshal writes the map's keys sorted.
    uri = 'minio://mlpipeline/v2/artifacts/taxi/run-1/Evaluator/u/blessing'
    common = (
        '"accessKeyKey":"accesskey","disableSSL":"true","endpoint":"{}","fromEnv":"false",'
        '{}"region":"minio","secretKeyKey":"secretkey","secretName":"mlpipeline-minio-artifact"'
    )
    assert kfp_cache.store_session_info(uri, kfp_profiles.KFP_2_5, kfp_cluster.Cluster()) == (
        '{"Provider":"minio","Params":{' + common.format('minio-service.kubeflow:9000', '') + '}}'
    )
    assert kfp_cache.store_session_info(uri, kfp_profiles.KFP_2_17, kfp_cluster.Cluster()) == (
        '{"Provider":"minio","Params":{'
        + common.format('seaweedfs.kubeflow:9000', '"maxRetries":"5",')
        + '}}'
    )
    # 2.0 records no session info.
    artifact = {'name': 'blessing', 'uri': uri, 'type': EXAMPLES_TYPE, 'metadata': {}}
    received = kfp_cache.published(artifact, 3, 'blessing', kfp_profiles.KFP_2_0)
    assert 'store_session_info' not in received['metadata']
