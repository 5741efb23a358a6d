"""2.17's driver-side resolution of a container's command and args (`kfp_container_args`), and
the earlier lines that hand them on as compiled. Each test names the Go function
(kubeflow/pipelines `backend/src/v2/driver/`) whose behaviour it pins."""

from __future__ import annotations

import pytest
from google.protobuf import json_format

from asynctrain.pipelines.kubeflow.compile import compiled_pipeline
from asynctrain.pipelines.kubeflow.local_backend import kfp_container_args, kfp_profiles


def _container(document: dict) -> compiled_pipeline.ContainerSpec:
    return json_format.ParseDict(document, compiled_pipeline.ContainerSpec())


CONTAINER = _container(
    {
        'image': 'i:1',
        'command': ['sh', '-c', "echo {{$.inputs.parameters['n']}}"],
        'args': [
            "--rate={{$.inputs.parameters['rate']}}",
            '{"IfPresent": {"InputName": "tag", "Then": ["--tag", "{{$.inputs.parameters[\'tag\']}}"]}}',
            '{"IfPresent": {"InputName": "missing", "Then": ["--x"], "Else": "--no-x"}}',
            '{"IfPresent": {"InputName": "nothing", "Then": "--y"}}',
            "{{$.outputs.parameters['count'].output_file}}={{$.inputs.parameters['n']}}",
            "--config={{$.inputs.parameters['config']}}",
            '{{$}}',
        ],
    }
)
PARAMETERS = {
    'n': 3.0,
    'rate': 1234567.5,
    'tag': 'v1',
    'nothing': None,
    'config': {'b': [1.0, 0.5], 'a': '<x>'},
}


def test_2_17s_driver_fills_input_parameters_and_if_present_leaving_outputs():
    # driver.go initPodSpecPatch -> util.go resolveContainerArgs on command and args (2.17.0):
    # fullInputParameterRe, pbValueToString (%d for a whole number, %g, json.Marshal),
    # resolveCondition (a null value is absent, no branch gives nothing), "$.outputs" kept.
    resolved = kfp_container_args.pod_container(CONTAINER, PARAMETERS, kfp_profiles.KFP_2_17)
    assert resolved.command == ['sh', '-c', 'echo 3']
    assert resolved.args == [
        '--rate=1.2345675e+06',
        '--tag',
        'v1',
        '--no-x',
        "{{$.outputs.parameters['count'].output_file}}={{$.inputs.parameters['n']}}",
        '--config={"a":"\\u003cx\\u003e","b":[1,0.5]}',
        '{{$}}',
    ]
    assert resolved.image == 'i:1'
    assert CONTAINER.args[0] == "--rate={{$.inputs.parameters['rate']}}"  # not changed


@pytest.mark.parametrize('profile', [kfp_profiles.KFP_2_0, kfp_profiles.KFP_2_5])
def test_before_2_17_the_driver_hands_command_and_args_as_compiled(profile):
    # 2.0.5, 2.5.0 initPodSpecPatch: userCmdArgs = command + args, untouched.
    assert kfp_container_args.pod_container(CONTAINER, PARAMETERS, profile) == CONTAINER


def test_2_17s_driver_fails_the_task_for_an_unknown_parameter_or_a_bad_clause():
    # resolveSinglePlaceholder, resolveCondition's messages, wrapped by initPodSpecPatch.
    unknown = _container({'command': ["{{$.inputs.parameters['gone']}}"]})
    with pytest.raises(
        ValueError,
        match=r'failed to resolve container command: failed to '
        r'resolve input parameters: parameter "gone" not found in executor input',
    ):
        kfp_container_args.pod_container(unknown, {}, kfp_profiles.KFP_2_17)
    bad = _container({'args': ['{"IfPresent": {"InputName": "t", "Then": [1]}}']})
    with pytest.raises(
        ValueError,
        match=r'failed to resolve container args: failed to resolve '
        r'condition: non-string item in IfPresent Then/Else array: int',
    ):
        kfp_container_args.pod_container(bad, {'t': 'x'}, kfp_profiles.KFP_2_17)


def test_driver_text_is_gos_pb_value_to_string():
    # util.go pbValueToString: int64 round trip for %d, else Go's shortest %g.
    cases = {
        1e21: '1e+21',
        0.0001: '0.0001',
        1e-05: '1e-05',
        -2.25: '-2.25',
        7: '7',
        0.1 + 0.2: '0.30000000000000004',
        True: 'true',
        None: '',
        'x': 'x',
    }
    assert {k: kfp_container_args.driver_text(k) for k in cases} == cases
    assert kfp_container_args.driver_text([1.0, 'a']) == '[1,"a"]'
