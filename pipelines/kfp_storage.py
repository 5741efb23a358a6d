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

# Scheme -> the local folder the launcher stages it under.
STAGING_ROOTS = {'gs://': '/gcs/', 'minio://': '/minio/', 's3://': '/s3/'}


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
