"""Where open-source KFP 2.x's launcher stages an artifact in the task's pod, by the scheme of its
URI: one rule, read by the compiled steps' entrypoint (`kfp_entrypoint`) and by `run --compiled`'s
launcher.

kubeflow/pipelines `backend/src/v2/component/launcher_v2.go`, `LocalPathForURI` (every 2.x):
`gs://B/K` is staged at `/gcs/B/K`, `minio://B/K` at `/minio/B/K`, `s3://B/K` at `/s3/B/K`; any
other URI is refused with "failed to generate local path for URI ...: unsupported storage scheme".
The launcher downloads each input artifact to its local path before the executor runs and uploads
each output's local path after it (`downloadArtifacts`, `uploadOutputArtifacts`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kfp.pipeline_spec import pipeline_spec_pb2

# Scheme -> the local folder the launcher stages it under.
STAGING_ROOTS = {'gs://': '/gcs/', 'minio://': '/minio/', 's3://': '/s3/'}
# The execution properties that name a folder outside the pipeline root, which the launcher does
# not stage: ExampleGen's data folder, the Pusher's and `latest_blessed_model`'s push destination.
INPUT_BASE, PUSH_DESTINATION = 'input_base', 'push_destination'
STORE_PARAMETERS = (INPUT_BASE, PUSH_DESTINATION)


class UnsupportedStorageScheme(ValueError):
    """The launcher's refusal of a URI it cannot stage."""


def local_path_for_uri(uri: str) -> str:
    """The launcher's local path for `uri` (`LocalPathForURI`).

    Raises:
      UnsupportedStorageScheme: not a gs://, minio:// or s3:// URI; the launcher's message.
    """
    for scheme, root in STAGING_ROOTS.items():
        if uri.startswith(scheme):
            return root + uri[len(scheme) :]
    raise UnsupportedStorageScheme(
        f'failed to generate local path for URI {uri}: unsupported storage scheme'
    )


def is_object_store_uri(uri: str) -> bool:
    """Whether the launcher stages `uri` (a gs://, minio:// or s3:// URI)."""
    return any(uri.startswith(scheme) for scheme in STAGING_ROOTS)


def _destination_directory(value: Any) -> str | None:
    """The folder a `push_destination` parameter names: the Pusher's is TFX's PushDestination as
    JSON, `latest_blessed_model`'s the folder itself."""
    if not isinstance(value, str):
        return None
    try:
        destination = json.loads(value)
    except ValueError:
        return value
    if not isinstance(destination, dict):
        return None
    return destination.get('filesystem', {}).get('base_directory')


def pod_local_paths(pipeline: pipeline_spec_pb2.PipelineSpec) -> list[str]:
    """The input folders and push destinations a compiled pipeline names by a local path, each as
    `<task>.<parameter>: <path>`. A step's pod starts with none of them and loses what it writes
    there, so on a cluster the ExampleGen finds no input and the next run no pushed model.
    """
    found = []
    for task_name, task in sorted(pipeline.root.dag.tasks.items()):
        for name, parameter in sorted(task.inputs.parameters.items()):
            constant = parameter.runtime_value.constant
            value = constant.string_value if constant.WhichOneof('kind') == 'string_value' else None
            if name == INPUT_BASE:
                path = value
            elif name == PUSH_DESTINATION:
                path = _destination_directory(value)
            else:
                continue
            if isinstance(path, str) and path and '://' not in path:
                found.append(f'{task_name}.{name}: {path}')
    return found


def check_pod_paths(pipeline: pipeline_spec_pb2.PipelineSpec) -> None:
    """Raises ValueError naming every `pod_local_paths` of `pipeline`, as `run --compiled` refuses
    them: its tasks see this machine's files, a cluster's pods would not."""
    local = pod_local_paths(pipeline)
    if local:
        raise ValueError(
            "a step's pod starts without these local paths and loses what it writes there:\n"
            + '\n'.join(f'  {where}' for where in local)
            + '\ncompile with gs:// or s3:// URIs for data and work_dir '
            '(docs/kubeflow.md, where artifacts live)'
        )
