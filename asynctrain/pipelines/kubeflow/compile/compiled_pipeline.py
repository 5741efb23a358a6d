"""The compiled pipeline in kfp's own typed form: the YAML `asynctrain compile --target kubeflow`
writes (or a PipelineJob JSON's `pipelineSpec`) parsed once into a `pipeline_spec_pb2.PipelineSpec`,
with typed accessors for what that proto leaves untyped.

kfp's proto keeps `deploymentSpec` as a `google.protobuf.Struct`, whose content is a
`PipelineDeploymentConfig`; `executors` parses it into that message's typed ExecutorSpecs. Parsing is
`json_format.ParseDict`: a field or value kfp's proto does not accept fails here, named, instead of
being ignored further on. What the proto holds as a `google.protobuf.Value` or `Struct` (a
constant, a default value, an artifact's metadata) becomes plain Python in one place, `plain`.
"""

from __future__ import annotations

import graphlib
from typing import Any

import yaml
from google.protobuf import json_format
from google.protobuf import message as message_lib
from kfp.pipeline_spec import pipeline_spec_pb2

PipelineSpec = pipeline_spec_pb2.PipelineSpec
ComponentSpec = pipeline_spec_pb2.ComponentSpec
PipelineTaskSpec = pipeline_spec_pb2.PipelineTaskSpec
ExecutorSpec = pipeline_spec_pb2.PipelineDeploymentConfig.ExecutorSpec
ContainerSpec = pipeline_spec_pb2.PipelineDeploymentConfig.PipelineContainerSpec
ImporterSpec = pipeline_spec_pb2.PipelineDeploymentConfig.ImporterSpec
_PARAMETER_TYPES = pipeline_spec_pb2.ParameterType.ParameterTypeEnum.DESCRIPTOR


def read_document(path: str) -> dict[str, Any]:
    """The PipelineSpec in `path` as the mapping its YAML or JSON holds (a PipelineJob's
    `pipelineSpec` taken), for the checks that read the document as written (`kfp_rules`).

    Raises:
      ValueError: the file holds no mapping.
    """
    with open(path, encoding='utf-8') as f:
        document = yaml.safe_load(f)
    if not isinstance(document, dict):
        raise ValueError(f'{path}: expected a PipelineSpec mapping, got {type(document).__name__}')
    return document.get('pipelineSpec', document)


def parse(document: dict[str, Any]) -> PipelineSpec:
    """`document` as kfp's PipelineSpec proto.

    Raises:
      ValueError: a field or value the proto does not accept (`json_format.ParseError`'s message).
    """
    try:
        return json_format.ParseDict(document, PipelineSpec())
    except json_format.ParseError as error:
        raise ValueError(f'not a PipelineSpec that kfp reads: {error}') from error


def load(path: str) -> PipelineSpec:
    """The compiled pipeline in `path` (`read_document`), parsed (`parse`)."""
    return parse(read_document(path))


def executors(pipeline: PipelineSpec) -> dict[str, ExecutorSpec]:
    """Executor label -> its typed ExecutorSpec (`deploymentSpec.executors`)."""
    deployment = json_format.ParseDict(
        json_format.MessageToDict(pipeline.deployment_spec),
        pipeline_spec_pb2.PipelineDeploymentConfig(),
    )
    return dict(deployment.executors)


def upstream_tasks(task: pipeline_spec_pb2.PipelineTaskSpec) -> set[str]:
    """The tasks `task` runs after: its `dependentTasks` and the producers of its inputs."""
    upstream = set(task.dependent_tasks)
    for artifact in task.inputs.artifacts.values():
        if artifact.HasField('task_output_artifact'):
            upstream.add(artifact.task_output_artifact.producer_task)
    for parameter in task.inputs.parameters.values():
        if parameter.HasField('task_output_parameter'):
            upstream.add(parameter.task_output_parameter.producer_task)
    return upstream


def task_order(pipeline: PipelineSpec) -> list[str]:
    """The root DAG's tasks in an order that runs every producer before its consumers."""
    graph = {name: upstream_tasks(task) for name, task in pipeline.root.dag.tasks.items()}
    # Ties broken by name, so that a run's order is the same every time.
    sorter = graphlib.TopologicalSorter({k: sorted(v) for k, v in sorted(graph.items())})
    order = []
    sorter.prepare()
    while sorter.is_active():
        ready = sorted(sorter.get_ready())
        order.extend(ready)
        sorter.done(*ready)
    return order


def component(pipeline: PipelineSpec, task: PipelineTaskSpec) -> ComponentSpec:
    """The ComponentSpec `task` runs (`componentRef.name`).

    Raises:
      KeyError: the pipeline has no component of that name.
    """
    name = task.component_ref.name
    if name not in pipeline.components:
        raise KeyError(name)  # Not `pipeline.components[name]`: a proto map would add it.
    return pipeline.components[name]


def plain(message: message_lib.Message) -> Any:
    """`message` as the plain Python value its JSON form holds (`json_format.MessageToDict`): a
    `Value` as a str, float (every number: the proto has no integers), bool, None, list or
    dict; a `Struct` or any other message as a dict, camelCase keys, unset fields left out."""
    return json_format.MessageToDict(message)


def parameter_type(
    spec: pipeline_spec_pb2.ComponentInputsSpec.ParameterSpec
    | pipeline_spec_pb2.ComponentOutputsSpec.ParameterSpec,
) -> str:
    """The `parameterType` of an input or output parameter spec by its name (`STRING`, ...); ''
    where the document names none (`PARAMETER_TYPE_ENUM_UNSPECIFIED`), the number where this
    kfp's proto has no name for it."""
    if not spec.parameter_type:
        return ''
    value = _PARAMETER_TYPES.values_by_number.get(spec.parameter_type)
    return value.name if value else str(spec.parameter_type)


def json_name(message: message_lib.Message, field: str | None) -> str:
    """The name the document gives `message`'s field `field` (`runtimeValue` for
    `runtime_value`; a oneof's `WhichOneof`), 'none' for None."""
    return message.DESCRIPTOR.fields_by_name[field].json_name if field else 'none'
