"""The driver's rules as `kfp_driver` applies them, value by value, line by line of KFP.

Each test names the Go function (kubeflow/pipelines, `backend/src/v2/`) whose behaviour it pins."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

from asynctrain.pipelines.kubeflow.compile import compiled_pipeline
from asynctrain.pipelines.kubeflow.local_backend import kfp_driver, kfp_profiles

RUN = kfp_driver.RunContext(
    pipeline_name='taxi',
    run_id='run-1',
    pipeline_root='s3://b/root/',
    created='2026-12-02T00:00:00',
    display_name='nightly taxi',
    workflow_name='taxi-x7k2q',
)
RUN_2_0 = dataclasses.replace(RUN, profile=kfp_profiles.KFP_2_0)
RUN_2_5 = dataclasses.replace(RUN, profile=kfp_profiles.KFP_2_5)
EXAMPLES_TYPE = {'instanceSchema': 'title: tfx.Examples\ntype: object\n'}
LOGS_TYPE = {'schemaTitle': 'system.Artifact'}
COMPONENT = json_format.ParseDict(
    {
        'outputDefinitions': {
            'artifacts': {'examples': {'artifactType': EXAMPLES_TYPE}},
            'parameters': {'count': {'parameterType': 'NUMBER_INTEGER'}},
        }
    },
    compiled_pipeline.ComponentSpec(),
)


def _input_parameters(task: dict, component: dict, *args):
    """`kfp_driver.input_parameters` of task 'T' given as the document writes it, parsed."""
    return kfp_driver.input_parameters(
        'T',
        json_format.ParseDict(task, compiled_pipeline.PipelineTaskSpec()),
        json_format.ParseDict(component, compiled_pipeline.ComponentSpec()),
        *args,
    )


def test_output_uris_have_a_per_execution_salt_from_2_5_only():
    # driver.go provisionOutputs: 2.0.5 generateOutputURI(root, name, task), no salt; 2.5.0
    # GenerateOutputURI(root, [task, outputURISalt, name]).
    assert kfp_driver.run_root(RUN) == 's3://b/root/taxi/run-1'
    root = kfp_driver.task_root(RUN, 'Transform')
    assert re.fullmatch(r's3://b/root/taxi/run-1/Transform/[0-9a-f-]{36}', root)
    assert kfp_driver.task_root(RUN, 'Transform') != root  # a new salt per execution
    assert kfp_driver.task_root(RUN_2_5, 'Transform') != kfp_driver.task_root(RUN_2_5, 'Transform')
    assert kfp_driver.task_root(RUN_2_0, 'Transform') == 's3://b/root/taxi/run-1/Transform'


def test_outputs_2_0_the_components_own_unnamed_and_the_fixed_metadata_file():
    # 2.0.5 provisionOutputs: no executor-logs, no name, OutputMetadataFilepath.
    root = 's3://b/root/taxi/run-1/T'
    assert kfp_driver.outputs(COMPONENT, root, kfp_profiles.KFP_2_0) == {
        'artifacts': {'examples': [{'uri': f'{root}/examples', 'type': EXAMPLES_TYPE}]},
        'parameters': {'count': {'outputFile': '/tmp/kfp/outputs/count'}},
        'outputFile': '/tmp/kfp_outputs/output_metadata.json',
    }


def test_outputs_2_5_add_the_executor_logs_artifact():
    # 2.5.0 provisionOutputs with publishOutput "true" (cmd/driver/main.go's default).
    root = 's3://b/root/taxi/run-1/T/u'
    assert kfp_driver.outputs(COMPONENT, root, kfp_profiles.KFP_2_5)['artifacts'] == {
        'examples': [{'uri': f'{root}/examples', 'type': EXAMPLES_TYPE}],
        'executor-logs': [{'uri': f'{root}/executor-logs', 'type': LOGS_TYPE}],
    }


def test_outputs_2_17_named_logs_qualified_and_the_metadata_file_in_the_task_root():
    # 2.15.0+ provisionOutputs: Name, outputFile under LocalPathForURI(taskRootRemote);
    # 2.16.1+ launcher qualifyExecutorLogsForRetry: "-0" on the first attempt.
    root = 's3://b/root/taxi/run-1/T/u'
    assert kfp_driver.outputs(COMPONENT, root, kfp_profiles.KFP_2_17) == {
        'artifacts': {
            'examples': [{'name': 'examples', 'uri': f'{root}/examples', 'type': EXAMPLES_TYPE}],
            'executor-logs': [
                {'name': 'executor-logs', 'uri': f'{root}/executor-logs-0', 'type': LOGS_TYPE}
            ],
        },
        'parameters': {'count': {'outputFile': '/tmp/kfp/outputs/count'}},
        'outputFile': '/s3/b/root/taxi/run-1/T/u/output_metadata.json',
    }
    # A root the launcher cannot stage: the legacy path, provisionOutputs' fallback.
    assert kfp_driver.output_file('/local/root', kfp_profiles.KFP_2_17) == (
        '/tmp/kfp_outputs/output_metadata.json'
    )


def _parameters(run, constant: str) -> dict:
    task = {'inputs': {'parameters': {'p': {'runtimeValue': {'constant': constant}}}}}
    component = {'inputDefinitions': {'parameters': {'p': {'parameterType': 'STRING'}}}}
    return _input_parameters(task, component, {}, {}, run)


def test_run_placeholders_resolve_by_line_and_only_as_a_whole_constant():
    # 2.0.5 resolveInputs passes a constant through; 2.5.0 resolveInputParameter matches five
    # names exactly; 2.16.0+ adds the create and schedule times.
    assert _parameters(RUN_2_0, '{{$.pipeline_job_name}}') == {'p': '{{$.pipeline_job_name}}'}
    assert _parameters(RUN_2_5, '{{$.pipeline_job_name}}') == {'p': 'nightly taxi'}
    assert _parameters(RUN_2_5, '{{$.pipeline_task_name}}') == {'p': 'T'}
    assert _parameters(RUN_2_5, '{{$.pipeline_task_uuid}}') == {'p': '1'}  # the DAG's id
    created = '{{$.pipeline_job_create_time_utc}}'
    assert _parameters(RUN_2_5, created) == {'p': created}
    assert _parameters(RUN, created) == {'p': '2026-12-02T00:00:00'}
    assert _parameters(RUN, 'x-{{$.pipeline_job_name}}') == {'p': 'x-{{$.pipeline_job_name}}'}


def test_parameters_resolve_constants_pipeline_inputs_upstream_outputs_and_defaults():
    task = {
        'inputs': {
            'parameters': {
                'a': {'runtimeValue': {'constant': 3.0}},
                'root_in': {'componentInputParameter': 'threshold'},
                'up': {'taskOutputParameter': {'producerTask': 'P', 'outputParameterKey': 'out'}},
            }
        }
    }
    component = {
        'inputDefinitions': {
            'parameters': {
                'a': {'parameterType': 'NUMBER_DOUBLE'},
                'root_in': {'parameterType': 'NUMBER_DOUBLE'},
                'up': {'parameterType': 'STRING'},
                'd': {'parameterType': 'STRING', 'defaultValue': 'x', 'isOptional': True},
                'o': {'parameterType': 'STRING', 'isOptional': True},
            }
        }
    }
    values = _input_parameters(task, component, {'threshold': 0.5}, {'P': {'out': 'hello'}}, RUN)
    # `d`: the launcher's addDefaultParams; `o`: optional, no default, left out.
    assert values == {'a': 3.0, 'root_in': 0.5, 'up': 'hello', 'd': 'x'}


def test_a_string_input_takes_any_value_as_text_other_types_must_match():
    # handleParamTypeValidationAndConversion, metadata.PbValueToText.
    component = {
        'inputDefinitions': {
            'parameters': {
                name: {'parameterType': 'STRING'} for name in ('n', 'f', 'small', 'b', 'l', 's')
            }
        }
    }
    constants = {'n': 5.0, 'f': 0.25, 'small': 1e-05, 'b': True, 'l': [1, 'a'], 's': {'k': 1}}
    task = {
        'inputs': {
            'parameters': {k: {'runtimeValue': {'constant': v}} for k, v in constants.items()}
        }
    }
    assert _input_parameters(task, component, {}, {}, RUN) == {
        'n': '5',
        'f': '0.25',
        'small': '0.00001',  # FormatFloat(v, 'f', -1, 64): never an exponent
        'b': 'true',
        'l': '[1,"a"]',
        's': '{"k":1}',
    }
    typed = {'inputDefinitions': {'parameters': {'n': {'parameterType': 'NUMBER_INTEGER'}}}}
    text = {'inputs': {'parameters': {'n': {'runtimeValue': {'constant': '5'}}}}}
    with pytest.raises(
        ValueError, match='T: input parameter "n" type mismatch: expect NUMBER_INTEGER, got string'
    ):
        _input_parameters(text, typed, {}, {}, RUN)


@pytest.mark.parametrize('parameter_type', ['TASK_FINAL_STATUS', 'TASK_CONFIG'])
def test_a_struct_is_accepted_for_the_struct_types_of_the_line(parameter_type):
    component = {'inputDefinitions': {'parameters': {'s': {'parameterType': parameter_type}}}}
    task = {'inputs': {'parameters': {'s': {'runtimeValue': {'constant': {'k': 1}}}}}}
    if parameter_type not in pipeline_spec_pb2.ParameterType.ParameterTypeEnum.keys():
        # TASK_CONFIG is in kfp-pipeline-spec 2.x (the TFX 1.21 line) only: with an older kfp
        # the spec is refused as it is parsed, naming the value, before any rule applies.
        with pytest.raises(json_format.ParseError, match=f'Invalid enum value {parameter_type}'):
            _input_parameters(task, component, {}, {}, RUN)
        return
    assert _input_parameters(task, component, {}, {}, RUN) == {'s': {'k': 1}}
    with pytest.raises(ValueError, match=f'expect {parameter_type}, got struct'):
        _input_parameters(task, component, {}, {}, RUN_2_5)


def test_a_legacy_constant_value_and_a_missing_required_input_are_refused():
    legacy = {'inputs': {'parameters': {'a': {'runtimeValue': {'constantValue': {'intValue': 1}}}}}}
    with pytest.raises(ValueError, match='T: input parameter a: .*constantValue not implemented'):
        _input_parameters(legacy, {}, {}, {}, RUN)
    required = {'inputDefinitions': {'parameters': {'b': {'parameterType': 'STRING'}}}}
    with pytest.raises(
        ValueError, match='neither value nor default value provided for non-optional parameter'
    ):
        _input_parameters({}, required, {}, {}, RUN)


def test_executor_input_carries_parameter_values_and_the_provisioned_outputs():
    outputs = kfp_driver.outputs(COMPONENT, 's3://b/r/t/u', kfp_profiles.KFP_2_17)
    received = {'name': '7', 'uri': 's3://b/x', 'type': {'instanceSchema': ''}}
    message = json.loads(
        kfp_driver.executor_input(
            {'n': 2.0},
            {'examples': [received]},
            outputs['artifacts'],
            outputs['outputFile'],
            outputs['parameters'],
        )
    )
    assert message['inputs'] == {
        'parameterValues': {'n': 2.0},
        'artifacts': {'examples': {'artifacts': [received]}},
    }
    assert message['outputs']['outputFile'] == '/s3/b/r/t/u/output_metadata.json'
    assert message['outputs']['parameters'] == {'count': {'outputFile': '/tmp/kfp/outputs/count'}}
    assert set(message['outputs']['artifacts']) == {'examples', 'executor-logs'}


def test_the_executor_output_merges_over_the_driver_but_not_over_managed_logs():
    provisioned = {
        'blessing': [{'uri': 'a', 'type': EXAMPLES_TYPE, 'metadata': {'k': 'v'}}],
        'executor-logs': [{'uri': 'l', 'type': LOGS_TYPE}],
    }
    written = {
        'artifacts': {
            'blessing': {'artifacts': [{'uri': 'b', 'metadata': {'blessed': 1}}]},
            'executor-logs': {'artifacts': [{'uri': 'elsewhere'}]},
        }
    }
    merged = kfp_driver.merge_executor_output(provisioned, written, kfp_profiles.KFP_2_17)
    assert merged['blessing'] == [
        {'uri': 'b', 'type': EXAMPLES_TYPE, 'metadata': {'k': 'v', 'blessed': 1}}
    ]
    # 2.16.1+ uploadOutputArtifacts: "executor-logs is launcher-managed"; before, merged.
    assert merged['executor-logs'][0]['uri'] == 'l'
    merged = kfp_driver.merge_executor_output(provisioned, written, kfp_profiles.KFP_2_5)
    assert merged['executor-logs'][0]['uri'] == 'elsewhere'


def test_job_name_is_the_display_name_resource_name_the_workflows_not_the_run_id():
    # resolveInputParameter: RunDisplayName (--run_display_name c.job.DisplayName) and RunName
    # (--run_name {{workflow.name}}, argocompiler/argo.go runResourceName), on both lines.
    for run in (RUN_2_5, RUN):
        assert _parameters(run, '{{$.pipeline_job_name}}') == {'p': 'nightly taxi'}
        assert _parameters(run, '{{$.pipeline_job_resource_name}}') == {'p': 'taxi-x7k2q'}
        assert _parameters(run, '{{$.pipeline_job_uuid}}') == {'p': 'run-1'}


def test_by_default_the_sdks_display_name_and_a_generated_workflow_name():
    # kfp Client: run_name or '<pipeline> %Y-%m-%d %H-%M-%S'; argo.go GenerateName
    # retrieveLastValidString(name) + '-', five characters from the API server's alphabet.
    run = kfp_driver.RunContext(pipeline_name='team/taxi', run_id='r', pipeline_root='s3://b/')
    assert re.fullmatch(r'team/taxi \d{4}-\d\d-\d\d \d\d-\d\d-\d\d', run.display_name)
    assert re.fullmatch(r'taxi-[bcdfghjklmnpqrstvwxz2456789]{5}', run.workflow_name)
    long_name = kfp_driver.workflow_name('a' * 70)  # the base cut to 58, '-' included
    assert re.fullmatch(r'a{58}[bcdfghjklmnpqrstvwxz2456789]{5}', long_name)
