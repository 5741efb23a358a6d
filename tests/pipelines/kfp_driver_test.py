"""The driver's and launcher's rules as `kfp_driver` applies them, value by value."""

from __future__ import annotations

import json
import re

import pytest

from pipelines import kfp_driver

RUN = kfp_driver.RunContext(
    pipeline_name='taxi',
    run_id='run-1',
    pipeline_root='gs://b/root/',
    created='2026-12-02T00:00:00',
)
EXAMPLES_TYPE = {'instanceSchema': 'title: tfx.Examples\ntype: object\n'}


def test_output_uris_follow_the_driver_under_a_per_execution_salt():
    assert kfp_driver.run_root(RUN) == 'gs://b/root/taxi/run-1'
    root = kfp_driver.task_root(RUN, 'Transform')
    assert re.fullmatch(r'gs://b/root/taxi/run-1/Transform/[0-9a-f-]{36}', root)
    assert kfp_driver.task_root(RUN, 'Transform') != root  # a new salt per execution
    component = {'outputDefinitions': {'artifacts': {'examples': {'artifactType': EXAMPLES_TYPE}}}}
    assert kfp_driver.output_artifacts(component, root) == {
        'examples': [{'name': 'examples', 'uri': f'{root}/examples', 'type': EXAMPLES_TYPE}]
    }


def test_parameters_resolve_constants_placeholders_pipeline_inputs_and_defaults():
    task = {
        'inputs': {
            'parameters': {
                'a': {'runtimeValue': {'constant': 3.0}},
                'job': {'runtimeValue': {'constant': '{{$.pipeline_job_name}}'}},
                'root_in': {'componentInputParameter': 'threshold'},
                'up': {'taskOutputParameter': {'producerTask': 'P', 'outputParameterKey': 'out'}},
            }
        }
    }
    component = {
        'inputDefinitions': {
            'parameters': {
                'a': {'parameterType': 'NUMBER_DOUBLE'},
                'd': {'parameterType': 'STRING', 'defaultValue': 'x'},
                'o': {'parameterType': 'STRING', 'isOptional': True},
            }
        }
    }
    values = kfp_driver.input_parameters(
        'T', task, component, {'threshold': 0.5}, {'P': {'out': 'hello'}}, RUN
    )
    assert values == {'a': 3.0, 'job': 'run-1', 'root_in': 0.5, 'up': 'hello', 'd': 'x'}


def test_a_legacy_constant_value_and_a_missing_required_input_are_refused():
    legacy = {'inputs': {'parameters': {'a': {'runtimeValue': {'constantValue': {'intValue': 1}}}}}}
    with pytest.raises(ValueError, match='T: input parameter a: .*constantValue not implemented'):
        kfp_driver.input_parameters('T', legacy, {}, {}, {}, RUN)
    required = {'inputDefinitions': {'parameters': {'b': {'parameterType': 'STRING'}}}}
    with pytest.raises(ValueError, match='T: input parameter b: required, and no value given'):
        kfp_driver.input_parameters('T', {}, required, {}, {}, RUN)


def test_executor_input_carries_parameter_values_only():
    text = kfp_driver.executor_input(
        {'n': 2.0},
        {'examples': [{'name': '7', 'uri': 'u', 'type': EXAMPLES_TYPE}]},
        {'model': [{'name': 'model', 'uri': 'm', 'type': EXAMPLES_TYPE}]},
        '/t/output_metadata.json',
    )
    message = json.loads(text)
    assert message['inputs'] == {
        'parameterValues': {'n': 2.0},
        'artifacts': {
            'examples': {'artifacts': [{'name': '7', 'uri': 'u', 'type': EXAMPLES_TYPE}]}
        },
    }
    assert 'parameters' not in message['inputs']
    assert message['outputs']['outputFile'] == '/t/output_metadata.json'


def test_the_executor_output_merges_over_the_driver_and_goes_through_ml_metadata():
    provisioned = {
        'blessing': [
            {'name': 'blessing', 'uri': 'a', 'type': EXAMPLES_TYPE, 'metadata': {'k': 'v'}}
        ]
    }
    written = {
        'artifacts': {
            'blessing': {
                'artifacts': [
                    {
                        'uri': 'b',
                        'metadata': {'blessed': 1, 'ok': True, 'splits': ['a'], 'm': {'x': 1}},
                    }
                ]
            }
        }
    }
    (merged,) = kfp_driver.merge_executor_output(provisioned, written)['blessing']
    assert merged['uri'] == 'b'
    assert merged['metadata'] == {
        'k': 'v',
        'blessed': 1,
        'ok': True,
        'splits': ['a'],
        'm': {'x': 1},
    }
    assert kfp_driver.published(merged, 12) == {
        'name': '12',
        'uri': 'b',
        'type': EXAMPLES_TYPE,
        'metadata': {
            'k': 'v',
            'blessed': 1,
            'ok': 1,  # a bool is stored as an int
            'splits': {'list': ['a']},  # lists and structs come back wrapped
            'm': {'struct': {'x': 1}},
        },
    }
    with pytest.raises(ValueError, match='unknown/unsupported value type'):
        kfp_driver.published({**merged, 'metadata': {'none': None}}, 13)
