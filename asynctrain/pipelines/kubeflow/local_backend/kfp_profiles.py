"""The open-source Kubeflow Pipelines 2.x lines that `asynctrain run --compiled` reproduces, one
frozen profile each, every field one behaviour of the backend's driver or launcher.

Each field names the Go file and function it is read from (kubeflow/pipelines, at the tag in
`source_tag`; `backend/src/v2/` below is shortened to `v2/`). The releases between the tags were
compared in the backend's history; where a behaviour changed inside a profile's range, the
profile follows its tag and the table says where the change falls (its last row, the cache, is
the same in every line and so not a field: see below):

| behaviour                        | 2.0 (2.0.5)  | 2.5 (2.5.0; 2.14.x)    | 2.17 (2.17.0)      |
|----------------------------------|--------------|------------------------|--------------------|
| `executor-logs` output added     | no           | yes                    | yes                |
| `executor-logs` launcher-managed | no           | no                     | yes (2.16.1+)      |
| output URI `<task>/<uuid>/<out>` | no (no uuid) | yes (2.4+)             | yes                |
| output RuntimeArtifact `name`    | no           | no                     | yes (2.15+)        |
| output metadata file             | `/tmp/kfp_outputs/...` | same         | task root (2.15+)  |
| `{{$.pipeline_*}}` constants     | stay literal | 5 names                | 7 (2.16+)          |
| `store_session_info` in MLMD (`v2/config/env.go` `GetStoreSessionInfo`: the ConfigMap's `providers` entry, else the default below) | no | yes (2.2+) | yes |
| `minio://` session info endpoint | –            | `minio-service.kubeflow:9000` | `seaweedfs.kubeflow:9000` (2.16+), `maxRetries` (2.15+) |
| struct-valued parameter types    | STRUCT       | STRUCT (2.14: + TASK_FINAL_STATUS) | + TASK_CONFIG |
| download only keys under prefix  | no           | no                     | yes (2.17)         |
| a failed task's logs uploaded    | no           | no                     | yes (2.16+)        |
| placeholders in argv[0] filled   | yes          | yes (2.14: no)         | no (inputs: by the driver) |
| driver fills `{{$.inputs.parameters[...]}}` and IfPresent in command/args, not `$.outputs` (`v2/driver/driver.go` `initPodSpecPatch`, `v2/driver/util.go` `resolveContainerArgs`) | no | no | yes (first in 2.17.0) |
| launcher's `minio://` endpoint and keys, never the step's environment (`v2/objectstore` `OpenBucket`, `MinioDefaultEndpoint`, `getMinioCredential`; `v2/config/env.go` `GetStoreSessionInfo`) | `MINIO_SERVICE_SERVICE_HOST`/`_PORT`, else `minio-service.kubeflow:9000`; keys: `mlpipeline-minio-artifact` | the ConfigMap's `providers`, else as 2.0 | `providers`, else `seaweedfs.kubeflow:9000` (`DefaultEndpointInMultiUserMode`, 2.16+); keys: the Secret named |
| `{{$.pipeline_job_name}}` / `{{$.pipeline_job_resource_name}}` (`v2/compiler/argocompiler/container.go` `--run_display_name` `c.job.DisplayName`, `argo.go` `runResourceName` `{{workflow.name}}`; `resolveInputParameter`) | stay literal | display name / workflow name | same |
| cache looked up (`enableCache`)  | yes          | yes                    | yes                |

Kept the same in every line (and so not a field): output parameters are read from
`/tmp/kfp/outputs/<name>` when the executor output does not hold them, a missing file failing the
task (`v2/driver` `provisionOutputs`, `v2/component/launcher_v2.go` `collectOutputParameters`);
a parameter's value is type-checked against its `parameterType`, any value given to a STRING
input turned into text (`handleParamTypeValidationAndConversion`, `v2/driver/driver.go` up to 2.5,
`v2/driver/resolve.go` after); an output path the executor did not write is not uploaded and not
an error (`uploadOutputArtifacts`); an upstream artifact reaches its consumer from ML Metadata with
an empty instance schema (`v2/metadata/client.go` `GetOutputArtifactsByExecutionId`,
`OutputArtifact.ToRuntimeArtifact`); and a task whose `cachingOptions.enableCache` is set is looked
up in KFP's cache, a succeeded execution of its key for the same pipeline handing back that
execution's outputs without running it (`v2/driver/driver.go` `Container`; from 2.14 the driver's
`--cache_disabled` flag turns that off for every task, but it defaults to false and a run here
never sets it). `{{$.pipeline_job_name}}` is the run's display name and
`{{$.pipeline_job_resource_name}}` its Argo workflow's name, `<last '/' part of the pipeline
name>-<5 characters>` (`v2/compiler/argocompiler/container.go` passes `--run_display_name`
`c.job.DisplayName` and `--run_name` `{{workflow.name}}`, `argo.go` `GenerateName`; the driver's
`resolveInputParameter`), on every line that resolves them. `run --compiled` emulates the cache on every line (`kfp_cache`, `compiled_run`),
across runs that share a metadata file.
"""

from __future__ import annotations

import dataclasses

# Every run placeholder the newest driver resolves in a constant (`v2/driver/resolve.go`,
# `resolveInputParameter`, 2.17.0); each older profile resolves a prefix of this tuple.
RUN_PLACEHOLDERS = (
    '{{$.pipeline_job_name}}',
    '{{$.pipeline_job_resource_name}}',
    '{{$.pipeline_job_uuid}}',
    '{{$.pipeline_task_name}}',
    '{{$.pipeline_task_uuid}}',
    '{{$.pipeline_job_create_time_utc}}',
    '{{$.pipeline_job_schedule_time_utc}}',
)
# The launcher's output metadata file up to 2.14 (`v2/component/launcher_v2.go`,
# `OutputMetadataFilepath`), still its fallback after.
LEGACY_OUTPUT_METADATA_FILE = '/tmp/kfp_outputs/output_metadata.json'
# The Params of a `minio://` root's default session info that every line from 2.2 records
# (`v2/config/env.go` `getDefaultMinioSessionInfo`); each profile adds its endpoint.
_MINIO_SESSION = (
    ('accessKeyKey', 'accesskey'),
    ('disableSSL', 'true'),
    ('fromEnv', 'false'),
    ('region', 'minio'),
    ('secretKeyKey', 'secretkey'),
    ('secretName', 'mlpipeline-minio-artifact'),
)
# Where the driver points each output parameter's file (`provisionOutputs`, every 2.x).
OUTPUT_PARAMETERS_DIR = '/tmp/kfp/outputs'


@dataclasses.dataclass(frozen=True)
class KfpProfile:
    """One open-source KFP 2.x line's driver and launcher.

    Attributes:
      version: The name `--kfp-version` takes: '2.0', '2.5' or '2.17'.
      source_tag: The kubeflow/pipelines tag every field was read from.
      releases: The releases that behave like this, in words.
      executor_logs: The driver adds an `executor-logs` output artifact (schemaTitle
        `system.Artifact`) to every container task, the `--publish_logs` default being "true"
        (`v2/driver/driver.go` `provisionOutputs`, `v2/cmd/driver/main.go`; from 2.5).
      executor_logs_launcher_managed: The launcher manages that artifact (2.16.1 on,
        `v2/component/launcher_v2.go`): it appends the retry index, `-0` on a first attempt, to
        its URI before the command runs (`qualifyExecutorLogsForRetry`,
        `appendRetryIndexSuffix`), never merges the executor output over it and does not record
        it when its file is missing (`uploadOutputArtifacts`).
      output_uri_salt: Output URIs are `<run root>/<task>/<uuid>/<output>`, a new UUID per
        execution, instead of `<run root>/<task>/<output>` (`provisionOutputs`,
        `metadata.GenerateOutputURI` with `outputURISalt`; from 2.4).
      output_names: Each output RuntimeArtifact carries `name` = the output's key ("Required by
        Pythonic artifacts", `provisionOutputs`; from 2.15).
      output_metadata_in_task_root: The ExecutorInput's `outputFile` is
        `LocalPathForURI(<task root>)/output_metadata.json` instead of
        `/tmp/kfp_outputs/output_metadata.json` (`provisionOutputs`; from 2.15).
      run_placeholders: The `{{$.pipeline_*}}` constants the driver replaces; any other stays
        literal (`resolveInputParameter`: none in 2.0.5, five from 2.5, the two times from 2.16).
      store_session_info: ML Metadata records each output with a `store_session_info` custom
        property, which a downstream task then receives in the artifact's metadata
        (`v2/metadata/client.go` `RecordArtifact`; from 2.2).
      minio_session_params: The Params of the session info a `minio://` root gets when the
        `kfp-launcher` ConfigMap has no `providers` entry for it (`v2/config/env.go`
        `getDefaultMinioSessionInfo`), recorded on every artifact as `store_session_info`: the
        keys from the `mlpipeline-minio-artifact` Secret, not the environment (`fromEnv` false);
        the endpoint `minio-service.kubeflow:9000` up to 2.15, `seaweedfs.kubeflow:9000` from
        2.16, and `maxRetries` from 2.15. Empty where no session info is recorded.
      struct_parameter_types: The parameter types a struct value is accepted for
        (`handleParamTypeValidationAndConversion`: STRUCT; 2.14 adds TASK_FINAL_STATUS, 2.15
        TASK_CONFIG).
      download_keys_under_prefix_only: `DownloadBlob` skips a listed key that merely starts with
        the artifact's key (`.../examples2` for `.../examples`) instead of downloading it to a
        path relative to the artifact's (`v2/objectstore/object_store.go`,
        `isBlobKeyUnderPrefix`; 2.17).
      upload_logs_of_failed_task: When the command fails the launcher still uploads and records
        the `executor-logs` artifact, and only it (`executeV2`, `uploadOutputArtifacts` with
        `componentSucceeded` false; 2.16 on).
      driver_fills_input_parameters: The driver fills `{{$.inputs.parameters['x']}}` and
        resolves `IfPresent` clauses in the container's command and args before the launcher
        sees them; an element naming `$.outputs` is left to the launcher (`v2/driver/driver.go`
        `initPodSpecPatch`, `v2/driver/util.go` `resolveContainerArgs`; first in 2.17.0).
      minio_default_endpoint: The endpoint a `minio://` root is opened at when nothing else names
        one (`v2/objectstore` `MinioDefaultEndpoint`'s `minio-service.kubeflow:9000`, a constant
        in 2.15,
        `DefaultEndpointInMultiUserMode` `seaweedfs.kubeflow:9000` from 2.16).
      minio_endpoint_from_service_variables: `MinioDefaultEndpoint` takes the namespace's
        `MINIO_SERVICE_SERVICE_HOST`/`_PORT` service variables first (2.0.5, 2.5.0; 2.15.0 has
        only the constant `DefaultMinioEndpointInMultiUserMode`).
      launcher_config_providers: The launcher reads the `kfp-launcher` ConfigMap's `providers`
        for a root's session (`v2/config/env.go` `GetStoreSessionInfo`; from 2.2).
      command_placeholders: The launcher fills the `{{$.inputs...}}` and `{{$.outputs...}}`
        placeholders in the command line's first element as well as in the rest (`executeV2`
        up to 2.5; from 2.14 `compileCmdAndArgs` fills them in a copy of the first element that
        it drops, `{{$}}` only being filled there).
    """

    version: str
    source_tag: str
    releases: str
    executor_logs: bool
    executor_logs_launcher_managed: bool
    output_uri_salt: bool
    output_names: bool
    output_metadata_in_task_root: bool
    run_placeholders: tuple[str, ...]
    store_session_info: bool
    minio_session_params: tuple[tuple[str, str], ...]
    struct_parameter_types: tuple[str, ...]
    download_keys_under_prefix_only: bool
    upload_logs_of_failed_task: bool
    command_placeholders: bool
    driver_fills_input_parameters: bool
    minio_default_endpoint: str
    minio_endpoint_from_service_variables: bool
    launcher_config_providers: bool

    def describe(self) -> str:
        """The one line a run's header shows."""
        return f'KFP {self.version} ({self.releases}; read from tag {self.source_tag})'


KFP_2_0 = KfpProfile(
    version='2.0',
    source_tag='2.0.5',
    releases='2.0.x, as Kubeflow 1.8 ships it',
    executor_logs=False,
    executor_logs_launcher_managed=False,
    output_uri_salt=False,
    output_names=False,
    output_metadata_in_task_root=False,
    run_placeholders=(),
    store_session_info=False,
    minio_session_params=(),
    struct_parameter_types=('STRUCT',),
    download_keys_under_prefix_only=False,
    upload_logs_of_failed_task=False,
    command_placeholders=True,
    driver_fills_input_parameters=False,
    minio_default_endpoint='minio-service.kubeflow:9000',
    minio_endpoint_from_service_variables=True,
    launcher_config_providers=False,
)
KFP_2_5 = KfpProfile(
    version='2.5',
    source_tag='2.5.0',
    releases='2.5.0 to 2.14.x',
    executor_logs=True,
    executor_logs_launcher_managed=False,
    output_uri_salt=True,
    output_names=False,
    output_metadata_in_task_root=False,
    run_placeholders=RUN_PLACEHOLDERS[:5],
    store_session_info=True,
    minio_session_params=_MINIO_SESSION + (('endpoint', 'minio-service.kubeflow:9000'),),
    struct_parameter_types=('STRUCT',),
    download_keys_under_prefix_only=False,
    upload_logs_of_failed_task=False,
    command_placeholders=True,
    driver_fills_input_parameters=False,
    minio_default_endpoint='minio-service.kubeflow:9000',
    minio_endpoint_from_service_variables=True,
    launcher_config_providers=True,
)
KFP_2_17 = KfpProfile(
    version='2.17',
    source_tag='2.17.0',
    releases='2.15 and later, as 2.17.0 behaves',
    executor_logs=True,
    executor_logs_launcher_managed=True,
    output_uri_salt=True,
    output_names=True,
    output_metadata_in_task_root=True,
    run_placeholders=RUN_PLACEHOLDERS,
    store_session_info=True,
    minio_session_params=_MINIO_SESSION
    + (('endpoint', 'seaweedfs.kubeflow:9000'), ('maxRetries', '5')),
    struct_parameter_types=('STRUCT', 'TASK_FINAL_STATUS', 'TASK_CONFIG'),
    download_keys_under_prefix_only=True,
    upload_logs_of_failed_task=True,
    command_placeholders=False,
    driver_fills_input_parameters=True,
    minio_default_endpoint='seaweedfs.kubeflow:9000',
    minio_endpoint_from_service_variables=False,
    launcher_config_providers=True,
)
PROFILES = {p.version: p for p in (KFP_2_0, KFP_2_5, KFP_2_17)}
NEWEST = KFP_2_17.version


def profile(version: str = NEWEST) -> KfpProfile:
    """The profile `--kfp-version` names.

    Raises:
      ValueError: not one of PROFILES, naming the allowed values.
    """
    if version not in PROFILES:
        raise ValueError(
            f'--kfp-version: {version!r} is not one of {", ".join(PROFILES)} (the KFP 2.x lines '
            'whose driver and launcher a compiled run reproduces)'
        )
    return PROFILES[version]
