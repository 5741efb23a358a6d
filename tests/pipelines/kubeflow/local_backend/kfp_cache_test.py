"""`kfp_cache`: the cache key as the driver builds it (kubeflow/pipelines
`backend/src/v2/cacheutils/cache.go`, `GenerateCacheKey`; `driver/driver.go`, `getFingerPrint`)
and the store of ids and executions that runs share."""

from __future__ import annotations

import copy

from asynctrain.pipelines.kubeflow.local_backend import kfp_cache

COMPONENT = {'outputDefinitions': {'parameters': {'count': {'parameterType': 'NUMBER_INTEGER'}}}}
CONTAINER = {'image': 'r/asynctrain:1', 'command': ['python', '-m', 'm'], 'args': ['{{$}}']}
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
    return kfp_cache.fingerprint(executor_input, COMPONENT, container)


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
