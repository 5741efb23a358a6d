"""An S3 endpoint on 127.0.0.1 for tests and benches: moto in server mode, a real HTTP server
speaking the S3 API, which is what MinIO (Kubeflow Pipelines' default artifact store) speaks too.

`s3_endpoint()` starts one and stops it; `S3Store.environment()` is what a process needs to reach
it, in the variables the ecosystem reads: `AWS_ENDPOINT_URL` and the `AWS_*` credentials for
boto3 (the launcher's staging here, Beam's S3 IO), `S3_ENDPOINT` and `S3_USE_HTTPS` for
tensorflow-io's `s3://` filesystem in TensorFlow. It needs `moto[server]` (in both locks; the
`testing` extra of the wheel).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

from asynctrain.components.shared import ports as ports_lib


@dataclasses.dataclass(frozen=True)
class S3Store:
    """A running endpoint.

    Attributes:
      endpoint: `http://127.0.0.1:PORT`.
    """

    endpoint: str

    def environment(self) -> dict[str, str]:
        return {
            'AWS_ENDPOINT_URL': self.endpoint,
            'AWS_ACCESS_KEY_ID': 'asynctrain-test',
            'AWS_SECRET_ACCESS_KEY': 'asynctrain-test',
            'AWS_REGION': 'us-east-1',
            'AWS_DEFAULT_REGION': 'us-east-1',
            'S3_ENDPOINT': self.endpoint,
            'S3_USE_HTTPS': '0',
            'S3_VERIFY_SSL': '0',
        }

    def client(self):
        import boto3

        env = self.environment()
        return boto3.client(
            's3',
            endpoint_url=self.endpoint,
            aws_access_key_id=env['AWS_ACCESS_KEY_ID'],
            aws_secret_access_key=env['AWS_SECRET_ACCESS_KEY'],
            region_name=env['AWS_REGION'],
        )

    def new_bucket(self, prefix: str = 'asynctrain') -> str:
        """Creates a bucket of a new name (a test's own) and returns the name."""
        name = f'{prefix}-{uuid.uuid4().hex[:10]}'
        self.client().create_bucket(Bucket=name)
        return name

    def upload_dir(self, local_dir: str, uri: str) -> None:
        """Every file under `local_dir` to `s3://bucket/prefix` (`uri`), same relative paths."""
        bucket, _, prefix = uri.removeprefix('s3://').partition('/')
        client = self.client()
        for root, _, files in os.walk(local_dir):
            for name in files:
                path = os.path.join(root, name)
                key = '/'.join(p for p in (prefix, os.path.relpath(path, local_dir)) if p)
                client.upload_file(path, bucket, key)

    def download_dir(self, uri: str, local_dir: str) -> str:
        """Every key under `s3://bucket/prefix/` (`uri`) into `local_dir`, same relative paths;
        returns `local_dir`. For tests to read what a run wrote (never through TensorFlow's S3
        filesystem in the test process: it aborts the process at exit)."""
        bucket, _, prefix = uri.removeprefix('s3://').partition('/')
        client = self.client()
        for key in self.keys(uri):
            path = os.path.join(local_dir, key)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            client.download_file(bucket, f'{prefix.rstrip("/")}/{key}', path)
        return local_dir

    def keys(self, uri: str) -> list[str]:
        """Every key under `s3://bucket/prefix`, relative to the prefix, sorted."""
        bucket, _, prefix = uri.removeprefix('s3://').partition('/')
        prefix = prefix.rstrip('/') + '/' if prefix else ''
        found = []
        for page in (
            self.client().get_paginator('list_objects_v2').paginate(Bucket=bucket, Prefix=prefix)
        ):
            found += [item['Key'][len(prefix) :] for item in page.get('Contents', [])]
        return sorted(found)


@contextlib.contextmanager
def s3_endpoint(log_path: str | None = None) -> Iterator[S3Store]:
    """Starts moto's S3 server on a free port of 127.0.0.1; stops it on exit."""
    port = ports_lib.free_port()
    log = open(log_path or os.devnull, 'w')  # noqa: SIM115 (closed below)
    server = subprocess.Popen(
        [sys.executable, '-m', 'moto.server', '-H', '127.0.0.1', '-p', str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            if server.poll() is not None:
                raise RuntimeError(f'moto server exited with {server.returncode}; see {log.name}')
            try:
                socket.create_connection(('127.0.0.1', port), 0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield S3Store(f'http://127.0.0.1:{port}')
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()
