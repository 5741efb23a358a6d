"""The object store (`s3://`) for a process whose TensorFlow cannot open it: the TFX 1.21 line.

On the TFX 1.16 line TensorFlow reads and writes `s3://` itself, through tensorflow-io
(`tf_environment.register_filesystems`). On the 1.21 line it cannot (`versions.HAS_TENSORFLOW_S3`),
so what touches the store there goes through boto3, the S3 client KFP's own launcher stages
artifacts with, in two ways:

- **A mirror**: `s3://B/K` copied to a local folder before the work (`Mirror.pull`) and what the
  work wrote there copied back after it (`Mirror.push`), as the launcher stages a step's
  artifacts. For what the launcher does not stage: a step's execution properties that name the
  store (the data folder, the push destination) and the TFJob replicas' arguments. Every process
  that maps a URI maps it to the same local path (`Mirror.local`), so a path the chief hands a
  worker (the files of a dataset) names the worker's own copy.
- **Single files** (`contains_saved_model`, `write_text`, `copy`): the Trainer pod's own few
  operations on the store in the `tfjob` mode, through TensorFlow where it can open the URI.

The endpoint is boto3's `AWS_ENDPOINT_URL`, else the `S3_ENDPOINT` (and `S3_USE_HTTPS`) that
tensorflow-io reads on the 1.16 line, so one pod configuration serves both lines; the keys are
boto3's `AWS_*` variables.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from typing import Any

from asynctrain.components.shared import versions

SCHEME = 's3://'
# The local folder every process mirrors the store under, unless told another.
DEFAULT_ROOT = os.path.join(tempfile.gettempdir(), 'asynctrain-store')
# A file being pulled, until it is renamed into place.
PARTIAL_PREFIX = '.asynctrain-partial-'


def needs_mirror(value: str) -> bool:
    """Whether `value` names the store and this line's TensorFlow cannot open it."""
    return SCHEME in value and not versions.HAS_TENSORFLOW_S3


def split_uri(uri: str) -> tuple[str, str]:
    """(bucket, key) of `s3://bucket/key`, the key without a trailing slash.

    Raises:
      ValueError: not an s3:// URI with a bucket.
    """
    if not uri.startswith(SCHEME) or not uri[len(SCHEME) :].split('/', 1)[0]:
        raise ValueError(f'{uri!r}: expected s3://BUCKET/KEY')
    bucket, _, key = uri[len(SCHEME) :].partition('/')
    return bucket, key.rstrip('/')


def endpoint_url(environ: dict[str, str] | None = None) -> str | None:
    """The S3 endpoint the environment names: `AWS_ENDPOINT_URL`, else tensorflow-io's
    `S3_ENDPOINT` (a host:port, https unless `S3_USE_HTTPS` is 0), else None (AWS itself)."""
    env = os.environ if environ is None else environ
    if env.get('AWS_ENDPOINT_URL'):
        return env['AWS_ENDPOINT_URL']
    endpoint = env.get('S3_ENDPOINT')
    if not endpoint:
        return None
    if '://' in endpoint:
        return endpoint
    return ('http://' if env.get('S3_USE_HTTPS') == '0' else 'https://') + endpoint


def client() -> Any:
    """A boto3 S3 client for the environment's endpoint."""
    import boto3  # Only a process that touches the store needs it.

    return boto3.client('s3', endpoint_url=endpoint_url())


def _keys(s3: Any, bucket: str, prefix: str) -> list[str]:
    """The keys of the object at `prefix` and of those under `prefix/`."""
    found = []
    for page in s3.get_paginator('list_objects_v2').paginate(Bucket=bucket, Prefix=prefix):
        found += [
            item['Key']
            for item in page.get('Contents', [])
            if item['Key'] == prefix or item['Key'].startswith(prefix + '/') or not prefix
        ]
    return found


@dataclasses.dataclass
class Mirror:
    """Local copies of s3:// folders and files under `root` (`root/BUCKET/KEY`)."""

    root: str = dataclasses.field(default_factory=lambda: DEFAULT_ROOT)
    # A boto3 S3 client; `client()` on first use.
    s3_client: Any = None
    # Local file -> (size, mtime) when pulled: what `push` leaves alone.
    _pulled: dict[str, tuple[int, int]] = dataclasses.field(default_factory=dict)

    @property
    def s3(self) -> Any:
        if self.s3_client is None:
            self.s3_client = client()
        return self.s3_client

    def local(self, uri: str) -> str:
        """The local path that mirrors `uri`."""
        bucket, key = split_uri(uri)
        return os.path.join(self.root, bucket, key)

    def pull(self, uri: str) -> str:
        """Copies the object at `uri`, or every object under it, to `local(uri)`; returns that
        path. Each file is written under a temporary name and renamed, so a process that shares
        the folder never reads half a file. Nothing under `uri` leaves an empty folder."""
        bucket, key = split_uri(uri)
        target = self.local(uri)
        keys = _keys(self.s3, bucket, key)
        if not keys:
            os.makedirs(target, exist_ok=True)
        for found in keys:
            path = target if found == key else os.path.join(target, found[len(key) :].lstrip('/'))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            partial = tempfile.NamedTemporaryFile(
                dir=os.path.dirname(path), prefix=PARTIAL_PREFIX, delete=False
            )
            partial.close()
            self.s3.download_file(bucket, found, partial.name)
            os.replace(partial.name, path)
            stat = os.stat(path)
            self._pulled[path] = (stat.st_size, stat.st_mtime_ns)
        return target

    def push(self, uri: str) -> int:
        """Copies what was written under `local(uri)` since `pull` (new or changed files) to
        `uri`; returns how many files."""
        bucket, key = split_uri(uri)
        source = self.local(uri)
        files = [source] if os.path.isfile(source) else _files_under(source)
        pushed = 0
        for path in files:
            stat = os.stat(path)
            if self._pulled.get(path) == (stat.st_size, stat.st_mtime_ns):
                continue
            relative = os.path.relpath(path, source)
            target_key = key if relative == '.' else f'{key}/{relative}'.lstrip('/')
            self.s3.upload_file(path, bucket, target_key)
            self._pulled[path] = (stat.st_size, stat.st_mtime_ns)
            pushed += 1
        return pushed


def _files_under(folder: str) -> list[str]:
    return sorted(
        os.path.join(directory, name)
        for directory, _, names in os.walk(folder)
        for name in names
        if not name.startswith(PARTIAL_PREFIX)  # A pull that never finished.
    )


def contains_saved_model(directory: str) -> bool:
    """`tf.saved_model.contains_saved_model`, for a directory on the store too."""
    if not needs_mirror(directory):
        import tensorflow as tf

        return tf.saved_model.contains_saved_model(directory)
    bucket, key = split_uri(directory)
    names = ('saved_model.pb', 'saved_model.pbtxt')
    return any(_keys(client(), bucket, f'{key}/{name}'.lstrip('/')) for name in names)


def write_text(path: str, text: str) -> None:
    """Writes `text` to `path`, its folder created, through TensorFlow or the store."""
    if not needs_mirror(path):
        import tensorflow as tf

        tf.io.gfile.makedirs(os.path.dirname(path))
        with tf.io.gfile.GFile(path, 'w') as f:
            f.write(text)
        return
    bucket, key = split_uri(path)
    client().put_object(Bucket=bucket, Key=key, Body=text.encode())


def copy(source: str, target: str) -> None:
    """Copies file `source` to `target` (overwriting), either or both on the store."""
    if not needs_mirror(source) and not needs_mirror(target):
        from tfx.dsl.io import fileio

        fileio.makedirs(os.path.dirname(target))
        fileio.copy(source, target, overwrite=True)
        return
    s3 = client()
    if needs_mirror(source):
        bucket, key = split_uri(source)
        data = s3.get_object(Bucket=bucket, Key=key)['Body'].read()
    else:
        with open(source, 'rb') as f:
            data = f.read()
    if needs_mirror(target):
        bucket, key = split_uri(target)
        s3.put_object(Bucket=bucket, Key=key, Body=data)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, 'wb') as f:
            f.write(data)
