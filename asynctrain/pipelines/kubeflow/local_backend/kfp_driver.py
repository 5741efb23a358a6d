"""What the open-source KFP 2.x driver does for one task, on this machine, line by line as
`kfp_profiles.KfpProfile` says, from the task's typed `PipelineTaskSpec` and `ComponentSpec`
(`compiled_pipeline`).

Each function follows the backend's Go code (kubeflow/pipelines, `backend/src/v2/`), named beside
it, so that a compiled spec runs here the way a cluster would run it:

- `run_root`, `task_root`, `outputs`: the driver's outputs (`metadata.GenerateOutputURI`,
  `driver.provisionOutputs`): `<pipeline root>/<pipeline name>/<run id>/<task>[/<uuid>]/<output>`,
  the `executor-logs` output, the output parameters' files and the output metadata file;
- `input_parameters`: the driver's parameter resolution (`driver/resolve.go`, `driver.go` up to
  2.5): constants, pipeline inputs (their defaults: no runtime config here), upstream output
  parameters, the `{{$.pipeline_*}}` placeholders of the profile, the type checks and the
  conversion to text of a STRING input (`handleParamTypeValidationAndConversion`), and the
  defaults of optional inputs that the launcher adds (`launcher_v2.addDefaultParams`);
- `executor_input`: the `{{$}}` ExecutorInput, with `parameterValues` only;
- `merge_executor_output`: the launcher's `mergeRuntimeArtifacts`;
- `importer_outputs`: an importer task's one output (`driver.Importer`).

What ML Metadata records of an output and hands the next task (`published`), and the driver's
cache lookup (the key, `GenerateCacheKey`; the store of succeeded executions), are `kfp_cache`'s;
`compiled_run` applies the lookup as the driver's `Container` does: a task whose
`cachingOptions.enableCache` is set and whose key a succeeded execution of the same pipeline
recorded is not launched; it publishes that execution's outputs. Every KFP line does so.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import json
import random
import uuid
from typing import Any

import numpy
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

from asynctrain.pipelines.kubeflow.compile import compiled_pipeline
from asynctrain.pipelines.kubeflow.container import kfp_storage
from asynctrain.pipelines.kubeflow.local_backend import kfp_container_args, kfp_profiles


@dataclasses.dataclass(frozen=True)
class RunContext:
    """The run that the driver's placeholders name, and the KFP line it runs on.

    Attributes:
      pipeline_name: `pipelineInfo.name`.
      run_id: The run's id (the cluster's is a UUID; `{{$.pipeline_job_uuid}}`).
      pipeline_root: The root every output URI starts with.
      created: The run's creation time, UTC, RFC 3339; its schedule time too (not scheduled).
      profile: The KFP line whose driver and launcher the run follows.
      dag_execution_id: The root DAG's ML Metadata execution id (`{{$.pipeline_task_uuid}}`).
      display_name: The run's display name, the name it was created with
        (`{{$.pipeline_job_name}}`); '' for the SDK's default, `<pipeline name> <local time
        %Y-%m-%d %H-%M-%S>` (`kfp.client.Client.create_run_from_pipeline_package`).
      workflow_name: Its Argo workflow's name (`{{$.pipeline_job_resource_name}}`); '' for one
        generated as the cluster does (`workflow_name`).
      store_session_info: The session info the root DAG driver builds once for the run's root
        and ML Metadata records on each artifact (`kfp_cache.store_session_info`); '' for the one a
        cluster without a `kfp-launcher` ConfigMap gives.
    """

    pipeline_name: str
    run_id: str
    pipeline_root: str
    created: str = dataclasses.field(
        default_factory=lambda: datetime.datetime.now(datetime.timezone.utc).isoformat()
    )
    profile: kfp_profiles.KfpProfile = kfp_profiles.KFP_2_17
    dag_execution_id: int = 1
    display_name: str = ''
    workflow_name: str = ''
    store_session_info: str = ''

    def __post_init__(self) -> None:
        if not self.display_name:
            now = datetime.datetime.now().strftime('%Y-%m-%d %H-%M-%S')
            object.__setattr__(self, 'display_name', f'{self.pipeline_name} {now}')
        if not self.workflow_name:
            object.__setattr__(self, 'workflow_name', workflow_name(self.pipeline_name))


# Kubernetes' generateName suffix: 5 characters of this alphabet, the base cut to 58
# (k8s.io/apiserver `names.SimpleNameGenerator`, `utilrand.String`).
_NAME_SUFFIX_ALPHABET = 'bcdfghjklmnpqrstvwxz2456789'


def workflow_name(pipeline_name: str) -> str:
    """The run's Argo workflow's name: the compiler's `GenerateName`, the last '/'-separated
    part of the pipeline's name and '-' (`v2/compiler/argocompiler/argo.go`,
    `retrieveLastValidString`), completed by the Kubernetes API server with 5 random
    characters."""
    base = pipeline_name.split('/')[-1] + '-'
    suffix = ''.join(random.choice(_NAME_SUFFIX_ALPHABET) for _ in range(5))
    return base[:58] + suffix


def output_uri(root: str, *paths: str) -> str:
    """`metadata.GenerateOutputURI`: joined with '/', the root's scheme kept (no path cleaning)."""
    return root.rstrip('/') + '/' + '/'.join(p.strip('/') for p in paths)


def run_root(run: RunContext) -> str:
    """The run's own root (`metadata.Client.GetPipeline`: `<root>/<pipeline name>/<run id>`)."""
    return output_uri(run.pipeline_root, run.pipeline_name, run.run_id)


def task_root(run: RunContext, task_name: str) -> str:
    """`provisionOutputs`: the task's root, salted with a new UUID per execution from 2.5
    (`outputURISalt`); 2.0.5's `generateOutputURI` has no salt."""
    if not run.profile.output_uri_salt:
        return output_uri(run_root(run), task_name)
    return output_uri(run_root(run), task_name, str(uuid.uuid4()))


def output_artifacts(
    component: compiled_pipeline.ComponentSpec,
    root: str,
    profile: kfp_profiles.KfpProfile = kfp_profiles.KFP_2_17,
) -> dict[str, list[dict[str, Any]]]:
    """`provisionOutputs`: one RuntimeArtifact per output under the task root, with the
    `executor-logs` output where the profile adds it, named where it names them."""
    definitions = {
        name: (compiled_pipeline.plain(d.artifact_type), compiled_pipeline.plain(d.metadata))
        for name, d in sorted(component.output_definitions.artifacts.items())
    }
    if profile.executor_logs:
        definitions['executor-logs'] = ({'schemaTitle': 'system.Artifact'}, {})
    outputs = {}
    for name, (artifact_type, metadata) in definitions.items():
        artifact = {'uri': output_uri(root, name), 'type': artifact_type}
        if profile.output_names:
            artifact = {'name': name, **artifact}
        if metadata:
            artifact['metadata'] = metadata
        outputs[name] = [artifact]
    if profile.executor_logs_launcher_managed and 'executor-logs' in outputs:
        # `qualifyExecutorLogsForRetry`: the first attempt's retry index.
        outputs['executor-logs'][0]['uri'] += '-0'
    return outputs


def output_file(root: str, profile: kfp_profiles.KfpProfile) -> str:
    """`provisionOutputs`' `outputFile`: the task root's local path (2.15+) or the launcher's
    fixed `/tmp/kfp_outputs/output_metadata.json`, also 2.15+'s fallback for a root the
    launcher cannot stage."""
    if profile.output_metadata_in_task_root:
        try:
            return kfp_storage.local_path_for_uri(root) + '/output_metadata.json'
        except kfp_storage.UnsupportedStorageScheme:
            pass
    return kfp_profiles.LEGACY_OUTPUT_METADATA_FILE


def outputs(
    component: compiled_pipeline.ComponentSpec, root: str, profile: kfp_profiles.KfpProfile
) -> dict[str, Any]:
    """The ExecutorInput's `outputs` as `provisionOutputs` fills them: artifacts, each output
    parameter's file (`/tmp/kfp/outputs/<name>`), the output metadata file."""
    return {
        'artifacts': output_artifacts(component, root, profile),
        'parameters': {
            name: {'outputFile': f'{kfp_profiles.OUTPUT_PARAMETERS_DIR}/{name}'}
            for name in sorted(component.output_definitions.parameters)
        },
        'outputFile': output_file(root, profile),
    }


def _placeholder(value: Any, run: RunContext, task_name: str) -> Any:
    """`resolveInputParameter`: a constant that is exactly one of the profile's run
    placeholders is replaced; any other value unchanged."""
    if not isinstance(value, str) or value not in run.profile.run_placeholders:
        return value
    return {
        # opts.RunDisplayName, `--run_display_name` c.job.DisplayName (argocompiler/container.go)
        '{{$.pipeline_job_name}}': run.display_name,
        # opts.RunName, `--run_name` `{{workflow.name}}` (argocompiler/argo.go runResourceName)
        '{{$.pipeline_job_resource_name}}': run.workflow_name,
        '{{$.pipeline_job_uuid}}': run.run_id,  # opts.RunID
        '{{$.pipeline_task_name}}': task_name,
        '{{$.pipeline_task_uuid}}': str(run.dag_execution_id),  # opts.DAGExecutionID
        '{{$.pipeline_job_create_time_utc}}': run.created,
        '{{$.pipeline_job_schedule_time_utc}}': run.created,
    }[value]


def value_text(value: Any) -> str:
    """`metadata.PbValueToText`: a parameter value as the text a STRING input receives, and as
    the launcher writes it into an input parameter's placeholder (`getPlaceholders`); a list or
    struct as JSON with a whole number (a float64 in Go) written without a fraction."""
    if value is None:
        return ''
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, float):
        # strconv.FormatFloat(v, 'f', -1, 64): the shortest digits that read back, no exponent.
        return numpy.format_float_positional(value, unique=True, trim='-')
    if isinstance(value, (list, dict)):
        return json.dumps(kfp_container_args.integral(value), separators=(',', ':'))
    return str(value)


def _checked(name: str, value: Any, parameter_type: str, profile: kfp_profiles.KfpProfile) -> Any:
    """`handleParamTypeValidationAndConversion`: a STRING input takes any value as text; any
    other type must match the value's kind.

    Raises:
      ValueError: the driver's message.
    """
    if parameter_type == 'STRING':
        return value if isinstance(value, str) else value_text(value)
    if value is None:
        raise ValueError(f'got null for input parameter "{name}"')
    if isinstance(value, str):
        actual = 'string'
    elif isinstance(value, bool):
        actual, accepted = 'bool', ('BOOLEAN',)
    elif isinstance(value, (int, float)):
        actual, accepted = 'number', ('NUMBER_DOUBLE', 'NUMBER_INTEGER')
    elif isinstance(value, list):
        actual, accepted = 'list', ('LIST',)
    else:
        actual, accepted = 'struct', profile.struct_parameter_types
    if actual == 'string' or parameter_type not in accepted:
        raise ValueError(
            f'input parameter "{name}" type mismatch: expect {parameter_type}, got {actual}'
        )
    return value


def _resolved(
    task_name: str,
    name: str,
    binding: pipeline_spec_pb2.TaskInputsSpec.InputParameterSpec,
    pipeline_inputs: dict[str, Any],
    upstream_parameters: dict[str, dict[str, Any]],
    run: RunContext,
) -> Any:
    """`resolveInputParameter`: one task input parameter's value."""
    kind = binding.WhichOneof('kind')
    if kind == 'runtime_value':
        runtime_value = binding.runtime_value
        value_kind = runtime_value.WhichOneof('value')
        if value_kind != 'constant':
            raise ValueError(
                f'{task_name}: input parameter {name}: param runtime value spec of type '
                f'{compiled_pipeline.json_name(runtime_value, value_kind)} not implemented'
            )
        return _placeholder(compiled_pipeline.plain(runtime_value.constant), run, task_name)
    if kind == 'component_input_parameter':
        return pipeline_inputs[binding.component_input_parameter]
    if kind == 'task_output_parameter':
        producer = binding.task_output_parameter
        return upstream_parameters[producer.producer_task][producer.output_parameter_key]
    raise ValueError(
        f'{task_name}: input parameter {name}: parameter spec of type '
        f'{compiled_pipeline.json_name(binding, kind)} not implemented yet'
    )


def input_parameters(
    task_name: str,
    task: compiled_pipeline.PipelineTaskSpec,
    component: compiled_pipeline.ComponentSpec,
    pipeline_inputs: dict[str, Any],
    upstream_parameters: dict[str, dict[str, Any]],
    run: RunContext,
) -> dict[str, Any]:
    """The task's `parameterValues` as the executor receives them: resolved and type-checked
    by the driver, optional inputs' defaults added by the launcher (`addDefaultParams`).

    Raises:
      ValueError: a parameter form the driver does not resolve, a required input with no value,
        or a value of the wrong type (the driver's messages, after the task's name).
    """
    values = {
        name: _resolved(task_name, name, binding, pipeline_inputs, upstream_parameters, run)
        for name, binding in sorted(task.inputs.parameters.items())
    }
    for name, definition in sorted(component.input_definitions.parameters.items()):
        if name not in values:
            if definition.HasField('default_value'):
                values[name] = compiled_pipeline.plain(definition.default_value)
            elif not definition.is_optional:
                raise ValueError(
                    f'{task_name}: input parameter {name}: neither value nor default value '
                    'provided for non-optional parameter'
                )
            continue
        try:
            values[name] = _checked(
                name, values[name], compiled_pipeline.parameter_type(definition), run.profile
            )
        except ValueError as e:
            raise ValueError(f'{task_name}: {e}') from e
    return values


def pipeline_inputs(root: compiled_pipeline.ComponentSpec) -> dict[str, Any]:
    """The root's input parameters at their defaults (a run here has no runtime config)."""
    values = {}
    for name, definition in sorted(root.input_definitions.parameters.items()):
        if definition.HasField('default_value'):
            values[name] = compiled_pipeline.plain(definition.default_value)
        elif not definition.is_optional:
            raise ValueError(f'root.inputDefinitions.parameters.{name}: required, and no default')
    return values


def executor_input(
    parameters: dict[str, Any],
    inputs: dict[str, list[dict[str, Any]]],
    outputs: dict[str, list[dict[str, Any]]],
    output_file: str,
    output_parameters: dict[str, dict[str, str]] | None = None,
) -> str:
    """The `{{$}}` placeholder's value: an ExecutorInput as JSON, parsed by kfp's own proto.

    Args:
      parameters: The input `parameterValues`.
      inputs: Input name -> its artifacts.
      outputs: Output name -> its artifacts (`outputs(...)['artifacts']`).
      output_file: The output metadata file (`outputs(...)['outputFile']`).
      output_parameters: Output parameter name -> `{'outputFile': path}`.
    """
    message = {
        'inputs': {
            'parameterValues': parameters,
            'artifacts': {name: {'artifacts': artifacts} for name, artifacts in inputs.items()},
        },
        'outputs': {
            'artifacts': {name: {'artifacts': artifacts} for name, artifacts in outputs.items()},
            'parameters': output_parameters or {},
            'outputFile': output_file,
        },
    }
    parsed = json_format.ParseDict(message, pipeline_spec_pb2.ExecutorInput())
    return json_format.MessageToJson(parsed, indent=None)


def merge_executor_output(
    outputs: dict[str, list[dict[str, Any]]],
    executor_output: dict[str, Any],
    profile: kfp_profiles.KfpProfile = kfp_profiles.KFP_2_17,
) -> dict[str, list[dict[str, Any]]]:
    """`launcher_v2.mergeRuntimeArtifacts`: the executor's URI, metadata fields and custom path
    over the driver's, output by output (the first artifact of each list, as the launcher;
    from 2.16.1 never over `executor-logs`, "launcher-managed", `uploadOutputArtifacts`)."""
    merged = copy.deepcopy(outputs)
    for name, artifacts in merged.items():
        written = executor_output.get('artifacts', {}).get(name, {}).get('artifacts', [])
        if not written or (name == 'executor-logs' and profile.executor_logs_launcher_managed):
            continue
        source, destination = written[0], artifacts[0]
        if source.get('uri'):
            destination['uri'] = source['uri']
        if source.get('metadata'):
            destination.setdefault('metadata', {}).update(source['metadata'])
        if source.get('customPath'):
            destination['customPath'] = source['customPath']
    return merged


def importer_outputs(
    importer: compiled_pipeline.ImporterSpec,
    parameters: dict[str, Any],
    component: compiled_pipeline.ComponentSpec,
) -> dict[str, list[dict[str, Any]]]:
    """An importer task (`driver.Importer`, `component/importer_launcher.go`): its one output
    artifact at the URI it names, a constant or one of the task's input parameters, recorded
    in ML Metadata as it is; nothing is staged or copied."""
    artifact_uri = importer.artifact_uri
    uri = (
        parameters.get(artifact_uri.runtime_parameter)
        if artifact_uri.HasField('runtime_parameter')
        else compiled_pipeline.plain(artifact_uri.constant)
    )
    if not isinstance(uri, str) or not uri:
        raise ValueError(
            f'importer: artifactUri {compiled_pipeline.plain(artifact_uri)} gives no URI'
        )
    ((key, definition),) = component.output_definitions.artifacts.items()
    artifact_type = (
        importer.type_schema if importer.HasField('type_schema') else definition.artifact_type
    )
    artifact = {'uri': uri, 'type': compiled_pipeline.plain(artifact_type)}
    metadata = compiled_pipeline.plain(importer.metadata)
    if metadata:
        artifact['metadata'] = metadata
    return {key: [artifact]}
