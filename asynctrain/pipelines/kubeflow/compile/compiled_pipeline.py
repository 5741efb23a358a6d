"""The compiled pipeline in kfp's own typed form: the YAML `asynctrain compile --target kubeflow`
writes (or a PipelineJob JSON's `pipelineSpec`) parsed once into a `pipeline_spec_pb2.PipelineSpec`,
with typed accessors for what that proto leaves untyped.

kfp's proto keeps `deploymentSpec` as a `google.protobuf.Struct`, whose content is a
`PipelineDeploymentConfig`; `executors` parses it into that message's typed ExecutorSpecs. Parsing is
`json_format.ParseDict`: a field or value kfp's proto does not accept fails here, named, instead of
being ignored further on.
"""

from __future__ import annotations

from typing import Any

import yaml
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

PipelineSpec = pipeline_spec_pb2.PipelineSpec
ExecutorSpec = pipeline_spec_pb2.PipelineDeploymentConfig.ExecutorSpec


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
