"""What the open-source KFP 2.x launcher does in a task's pod around the user's command, on this
machine: input artifacts downloaded from the object store to their local staging paths before
the command runs, the output folders made, and after it each output's local path uploaded to
its URI, its output parameters collected.

Read from kubeflow/pipelines `backend/src/v2/component/launcher_v2.go` (`execute`,
`downloadArtifacts`, `prepareOutputFolders`, `getExecutorOutputFile`, `collectOutputParameters`,
`uploadOutputArtifacts`) and `backend/src/v2/objectstore/object_store.go` (`DownloadBlob`,
`UploadBlob`), every 2.x unless a `kfp_profiles.KfpProfile` field says otherwise.

A pod's local paths (`/s3/...`, `/tmp/kfp_outputs/...`) are a `Pod`'s host folders here: the
task's process sees them at those paths through a mount namespace of its own
(`compiled_task.enter_pod`), this process reads and writes them behind it.

The object store: `minio://B/K` is key K of bucket B at the endpoint, and with the keys, that the
profile's launcher takes from its cluster (`kfp_cluster`: the `kfp-launcher` ConfigMap, the
`mlpipeline-minio-artifact` Secret, the default address; its `s3_client` is what `ObjectStore`
wraps), never from the step's environment;
`s3://B/K` at the endpoint of the SDK's own chain (boto3's standard variables, the launcher's
`fromEnv`). MinIO, KFP's default store, speaks S3. `gs://` is refused: this machine has no GCS
endpoint.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from typing import Any

from asynctrain.pipelines.kubeflow.compile import compiled_pipeline
from asynctrain.pipelines.kubeflow.container import kfp_storage
from asynctrain.pipelines.kubeflow.local_backend import kfp_driver, kfp_profiles

# The pod paths a task's process must see as its own: the launcher's staging roots
# (`LocalPathForURI`), the output metadata file's folder up to 2.14 and the output parameters'.
POD_PATHS = (
    '/gcs',
    '/minio',
    '/s3',
    os.path.dirname(kfp_profiles.LEGACY_OUTPUT_METADATA_FILE),
    kfp_profiles.OUTPUT_PARAMETERS_DIR.rsplit('/', 1)[0],
)
EXECUTOR_LOGS = 'executor-logs'
ON_A_CLUSTER = (
    'On a cluster every task fails so: the launcher has nowhere to stage an artifact of such a '
    "URI, and what a task writes stays in its pod's file system, lost when the pod ends. Give "
    'an s3:// or minio:// pipeline root.'
)


class StagingRefused(ValueError):
    """A URI the launcher, or this machine, cannot stage."""


def placeholders(executor_input: dict[str, Any]) -> dict[str, str]:
    """`getPlaceholders`: the `{{$.inputs...}}` and `{{$.outputs...}}` placeholders of a task,
    from the first artifact of each list.

    Raises:
      StagingRefused: an output artifact without a local path (the launcher's error).
    """
    found = {}
    for name, artifacts in executor_input['inputs'].get('artifacts', {}).items():
        if not artifacts['artifacts']:
            continue
        artifact = artifacts['artifacts'][0]
        found[f"{{{{$.inputs.artifacts['{name}'].uri}}}}"] = artifact['uri']
        try:
            found[f"{{{{$.inputs.artifacts['{name}'].path}}}}"] = _local_path(artifact)
        except kfp_storage.UnsupportedStorageScheme:
            pass  # "Input Artifact does not have a recognized storage URI": no path placeholder.
    for name, artifacts in executor_input['outputs'].get('artifacts', {}).items():
        if not artifacts['artifacts']:
            continue
        artifact = artifacts['artifacts'][0]
        found[f"{{{{$.outputs.artifacts['{name}'].uri}}}}"] = artifact['uri']
        try:
            found[f"{{{{$.outputs.artifacts['{name}'].path}}}}"] = _local_path(artifact)
        except kfp_storage.UnsupportedStorageScheme as e:
            raise StagingRefused(f'resolve output artifact "{name}"\'s local path: {e}') from e
    for name, value in executor_input['inputs'].get('parameterValues', {}).items():
        found[f"{{{{$.inputs.parameters['{name}']}}}}"] = kfp_driver.value_text(value)
    for name, parameter in executor_input['outputs'].get('parameters', {}).items():
        found[f"{{{{$.outputs.parameters['{name}'].output_file}}}}"] = parameter['outputFile']
    return found


def command_line(
    container: compiled_pipeline.ContainerSpec,
    executor_input: dict[str, Any],
    profile: kfp_profiles.KfpProfile,
) -> list[str]:
    """The command line the launcher runs: the container's command and arguments, which the
    driver hands it as one list (`initPodSpecPatch`'s `userCmdArgs`), the first element its
    `cmd`, the rest its `args` (`NewLauncherV2`). `{{$}}` becomes the ExecutorInput as JSON
    everywhere; the other placeholders are filled in the args, and in `cmd` too up to 2.5
    (`executeV2`; from 2.14 `compileCmdAndArgs` fills them into a copy of `cmd` it then drops);
    an unknown placeholder stays as written."""
    invocation = json.dumps(executor_input, separators=(',', ':'))
    found = placeholders(executor_input)

    def filled(text: str) -> str:
        text = text.replace('{{$}}', invocation)
        for key, value in found.items():
            text = text.replace(key, value)
        return text

    cmd, *args = [*container.command, *container.args]
    cmd = filled(cmd) if profile.command_placeholders else cmd.replace('{{$}}', invocation)
    return [cmd, *(filled(a) for a in args)]


def check_pipeline_root(root: str) -> None:
    """Refuses a pipeline root whose artifacts the launcher could not stage, before any task.

    Raises:
      StagingRefused: not an object-store URI (the launcher's `LocalPathForURI` message and what
        a cluster does with it), or a gs:// root (no GCS endpoint here).
    """
    try:
        kfp_storage.local_path_for_uri(root)
    except kfp_storage.UnsupportedStorageScheme as e:
        raise StagingRefused(f'{e}\n{ON_A_CLUSTER}') from e
    bucket_and_key(root)


def bucket_and_key(uri: str) -> tuple[str, str]:
    """(bucket, key) of an s3:// or minio:// URI at this machine's S3 endpoint.

    Raises:
      StagingRefused: a gs:// URI, or a scheme the launcher does not stage.
    """
    if uri.startswith('gs://'):
        raise StagingRefused(
            f'{uri}: gs:// is not served here (no GCS endpoint on this machine); give an s3:// '
            'or minio:// pipeline root, served by the S3 endpoint in AWS_ENDPOINT_URL'
        )
    for scheme in ('s3://', 'minio://'):
        if uri.startswith(scheme):
            bucket, _, key = uri[len(scheme) :].partition('/')
            return bucket, key.rstrip('/')
    raise StagingRefused(f'failed to generate local path for URI {uri}: unsupported storage scheme')


@dataclasses.dataclass(frozen=True)
class Pod:
    """The host folder behind one task's pod paths.

    Attributes:
      root: The folder; pod path `/s3/b/k` is `<root>/s3/b/k` here.
    """

    root: str

    def host_path(self, pod_path: str) -> str:
        """Where this process finds `pod_path` (an absolute path under one of POD_PATHS)."""
        if not any(pod_path == p or pod_path.startswith(p + '/') for p in POD_PATHS):
            raise ValueError(f'{pod_path}: not under a pod path ({", ".join(POD_PATHS)})')
        return self.root + pod_path

    def make(self) -> None:
        """Creates the empty folders the task's mount points show."""
        for path in POD_PATHS:
            os.makedirs(self.root + path, exist_ok=True)


class ObjectStore:
    """An S3 endpoint as the launcher's bucket (`objectstore.OpenBucket`)."""

    def __init__(self, client: Any = None):
        if client is None:
            import boto3  # Only a run that stages anything needs it.

            client = boto3.client('s3')
        self._client = client

    def keys(self, bucket: str, prefix: str) -> list[str]:
        """Every key of `bucket` starting with `prefix` (`bucket.List`)."""
        found = []
        paginator = self._client.get_paginator('list_objects_v2')
        for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
            found += [item['Key'] for item in page.get('Contents', [])]
        return found

    def download(self, bucket: str, key: str, path: str) -> None:
        self._client.download_file(bucket, key, path)

    def upload(self, path: str, bucket: str, key: str) -> None:
        self._client.upload_file(path, bucket, key)


def download_blob(
    store: ObjectStore,
    uri: str,
    local_dir: str,
    profile: kfp_profiles.KfpProfile,
    pod_root: str,
) -> int:
    """`objectstore.DownloadBlob`: every key listed with the artifact's key as a prefix, to its
    path relative to that key under `local_dir` (the key itself, a file artifact, to
    `local_dir`). Up to 2.16 a key that merely starts with it (`.../model_run/x` for
    `.../model`) is written beside the artifact (`.../model_run/x`); 2.17 skips it
    (`isBlobKeyUnderPrefix`). Returns how many files were written.

    Raises:
      StagingRefused: a key with a `..` component (2.17's `sanitizeDownloadPath`), or one that
        would land outside the pod's folder `pod_root` (which the launcher, writing to a pod of
        its own, need not check).
    """
    bucket, blob_dir = bucket_and_key(uri)
    written = 0
    for key in store.keys(bucket, blob_dir):
        if profile.download_keys_under_prefix_only:
            if not (key == blob_dir or key.startswith(blob_dir + '/')):
                continue
            if '..' in key.split('/'):
                raise StagingRefused(
                    f'path traversal detected: blob key "{key}" contains \'..\' component'
                )
        # filepath.Join(localDir, filepath.Rel(blobDir, key)).
        path = os.path.normpath(os.path.join(local_dir, os.path.relpath(key, blob_dir)))
        if not path.startswith(pod_root.rstrip('/') + '/'):
            raise StagingRefused(f'blob key {key!r} resolves to {path!r}, outside the pod')
        os.makedirs(os.path.dirname(path), exist_ok=True)
        store.download(bucket, key, path)
        written += 1
    return written


def upload_blob(store: ObjectStore, local_path: str, uri: str) -> bool:
    """`objectstore.UploadBlob`: a file to the URI's key, a folder's files recursively under it.
    Returns False when `local_path` does not exist, which the launcher lets pass ("We allow
    components to not produce output files")."""
    bucket, key = bucket_and_key(uri)
    if not os.path.exists(local_path):
        return False
    if not os.path.isdir(local_path):
        store.upload(local_path, bucket, key)
        return True
    for entry in sorted(os.listdir(local_path)):
        upload_blob(store, os.path.join(local_path, entry), f'{uri.rstrip("/")}/{entry}')
    return True


def _local_path(artifact: dict[str, Any]) -> str:
    """`retrieveArtifactPath`: the artifact's custom path, else `LocalPathForURI` of its URI."""
    return artifact.get('customPath') or kfp_storage.local_path_for_uri(artifact['uri'])


def _check_other_bucket(name: str, uri: str, run_root: str) -> None:
    """`fetchNonDefaultBuckets`: an input outside the run's prefixed bucket must name a bucket
    the launcher can open (`objectstore.ParseBucketConfigForArtifactURI`); any other fails the
    task before anything is downloaded, every 2.x.

    Raises:
      StagingRefused: the launcher's message.
    """
    if uri.startswith(run_root.rstrip('/')):
        return
    scheme, separator, rest = uri.partition('://')
    if not separator or not scheme or not rest.lstrip('/'):
        reason = f'unrecognized uri format: "{uri}"'
    elif scheme not in ('gs', 's3', 'minio', 'mem'):
        reason = f'unsupported Cloud bucket: "{uri}"'
    else:
        return
    raise StagingRefused(
        f'failed to fetch non default buckets: failed to parse bucketConfig for output artifact '
        f'"{name}" with uri "{uri}": parse bucket config failed: {reason}'
    )


def download_inputs(
    executor_input: dict[str, Any],
    pod: Pod,
    store: ObjectStore,
    profile: kfp_profiles.KfpProfile,
    run_root: str,
) -> None:
    """`downloadArtifacts`: each input artifact to its local path in the pod.

    Raises:
      StagingRefused: an input of a URI the launcher cannot open a bucket for.
      RuntimeError: a download failed (the launcher's message).
    """
    artifacts_by_name = executor_input['inputs'].get('artifacts', {})
    for name, artifacts in artifacts_by_name.items():
        if artifacts['artifacts']:
            _check_other_bucket(name, artifacts['artifacts'][0]['uri'], run_root)
    for name, artifacts in artifacts_by_name.items():
        for artifact in artifacts['artifacts']:
            try:
                local_path = _local_path(artifact)
            except kfp_storage.UnsupportedStorageScheme:
                continue  # "Skipping downloading to local path" (a warning).
            try:
                download_blob(store, artifact['uri'], pod.host_path(local_path), profile, pod.root)
            except Exception as e:
                raise RuntimeError(
                    f'failed to download input artifact "{name}" from remote storage URI '
                    f'"{artifact["uri"]}": {e}'
                ) from e


def prepare_output_folders(executor_input: dict[str, Any], pod: Pod) -> None:
    """`prepareOutputFolders`: the folder of each output parameter's file and of each output
    artifact's local path (not the path itself)."""
    outputs = executor_input['outputs']
    for parameter in outputs.get('parameters', {}).values():
        os.makedirs(os.path.dirname(pod.host_path(parameter['outputFile'])), exist_ok=True)
    for artifacts in outputs.get('artifacts', {}).values():
        for artifact in artifacts['artifacts']:
            os.makedirs(os.path.dirname(pod.host_path(_local_path(artifact))), exist_ok=True)
    # Not the output metadata file's folder: no 2.x launcher makes it. From 2.15 it is the
    # task root, which the loop above makes as the parent of every output. Up to 2.14 it is
    # /tmp/kfp_outputs, which the executor must make on a cluster; here it is the pod's mount
    # point and so exists (`compiled_task.enter_pod`).


def executor_output(executor_input: dict[str, Any], pod: Pod) -> dict[str, Any]:
    """`getExecutorOutputFile`: the executor's output file as JSON, `{}` when it wrote none."""
    path = pod.host_path(executor_input['outputs']['outputFile'])
    if not os.path.exists(path):
        return {}
    with open(path, encoding='utf-8') as f:
        return json.load(f)


def _text_to_value(text: str, parameter_type: str) -> Any:
    """`metadata.TextToPbValue`: an output parameter's file content as its declared type."""
    if parameter_type == 'STRING':
        return text
    if parameter_type == 'NUMBER_INTEGER':
        return float(int(text.strip()))
    if parameter_type == 'NUMBER_DOUBLE':
        return float(text.strip())
    if parameter_type == 'BOOLEAN':
        return {'true': True, 'false': False, '1': True, '0': False}[text.strip().lower()]
    if parameter_type in ('LIST', 'STRUCT'):
        value = json.loads(text)
        if not isinstance(value, list if parameter_type == 'LIST' else dict):
            raise ValueError('unexpected type')
        return value
    raise ValueError(
        'unknown type. Expected STRING, NUMBER_INTEGER, NUMBER_DOUBLE, BOOLEAN, LIST or STRUCT'
    )


def collect_output_parameters(
    executor_input: dict[str, Any],
    written: dict[str, Any],
    component: compiled_pipeline.ComponentSpec,
    pod: Pod,
) -> dict[str, Any]:
    """`collectOutputParameters`: the executor output's parameter values, and each output
    parameter it lacks read from its file.

    Raises:
      RuntimeError: a parameter's file is missing or does not parse (the launcher fails the
        task with this message).
    """
    values = dict(written.get('parameterValues', {}))
    types = {
        name: compiled_pipeline.parameter_type(spec)
        for name, spec in component.output_definitions.parameters.items()
    }
    for name, parameter in executor_input['outputs'].get('parameters', {}).items():
        if name in values:
            continue  # The output metadata file has the highest priority.
        parameter_type = types[name]
        try:
            with open(pod.host_path(parameter['outputFile']), encoding='utf-8') as f:
                values[name] = _text_to_value(f.read(), parameter_type)
        except (OSError, ValueError, KeyError) as e:
            raise RuntimeError(
                f'failed to read output parameter name="{name}" type="{parameter_type}" '
                f'path="{parameter["outputFile"]}": {e}'
            ) from e
    return values


def upload_outputs(
    outputs: dict[str, list[dict[str, Any]]],
    pod: Pod,
    store: ObjectStore,
    succeeded: bool,
    profile: kfp_profiles.KfpProfile,
    run_root: str,
) -> dict[str, list[dict[str, Any]]]:
    """`uploadOutputArtifacts`: each output's local path to its URI; returns the outputs the
    launcher records in ML Metadata (all of them; when the command failed, only the
    `executor-logs` artifact from 2.16 on, none before). An output whose local path does not
    exist is recorded without an upload ("We allow components to not produce output files");
    a missing `executor-logs` file is not recorded (2.16.1+).

    Raises:
      StagingRefused: an output's URI (the executor's, merged) is outside the run's root, which
        the launcher's `bucketConfig.KeyFromURI` refuses.
    """
    if not succeeded:
        if not profile.upload_logs_of_failed_task or EXECUTOR_LOGS not in outputs:
            return {}
        outputs = {EXECUTOR_LOGS: outputs[EXECUTOR_LOGS]}
    prefixed_bucket = run_root.rstrip('/')
    recorded = {}
    # By name: the launcher walks a Go map, in no set order; a run here is the same every time.
    for name, artifacts in sorted(outputs.items()):
        kept = []
        for artifact in artifacts:
            try:
                local_path = _local_path(artifact)
            except kfp_storage.UnsupportedStorageScheme:
                # "Skipping uploading to remote storage" (a warning); still recorded.
                if not (name == EXECUTOR_LOGS and profile.executor_logs_launcher_managed):
                    kept.append(artifact)
                continue
            if not artifact['uri'].startswith(prefixed_bucket):
                raise StagingRefused(
                    f'failed to upload output artifact "{name}": URI "{artifact["uri"]}" does '
                    f'not have expected bucket prefix "{prefixed_bucket}"'
                )
            uploaded = upload_blob(store, pod.host_path(local_path), artifact['uri'])
            if not uploaded and name == EXECUTOR_LOGS and profile.executor_logs_launcher_managed:
                continue
            kept.append(artifact)
        if kept:
            recorded[name] = kept
    return recorded


def write_executor_logs(outputs: dict[str, list[dict[str, Any]]], pod: Pod, log_path: str) -> None:
    """`getLogWriter`: the command's stdout and stderr, which the launcher tees into the
    `executor-logs` artifact's local path; here the task's log, copied there after it ran."""
    if EXECUTOR_LOGS not in outputs or len(outputs[EXECUTOR_LOGS]) != 1:
        return
    path = pod.host_path(_local_path(outputs[EXECUTOR_LOGS][0]))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.exists(log_path):
        shutil.copyfile(log_path, path)
