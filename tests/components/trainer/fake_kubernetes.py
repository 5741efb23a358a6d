"""A fake Kubernetes API server on 127.0.0.1 for the TFJob tests.

It answers the TFJob and Pod calls the Training Operator SDK's real `TrainingClient` makes
(create, get, delete a TFJob; list a job's pods) with scripted objects and records every request,
so the submit/wait/cancel path runs end to end without a cluster. The `fake_api` fixture in
`conftest.py` yields `(server, training_client)`; a test sets on `server`:

- `statuses`: TFJob status dicts returned by successive GETs (the last one repeats);
- `pods`: the pods a pod list returns;
- `on_get`: an optional callable run on each TFJob GET;

and reads `server.requests`: `(method, path, query, body)` tuples in arrival order.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
import urllib.parse
from collections.abc import Iterator

from kubeflow.training import TrainingClient
from kubernetes import client as k8s


class _FakeKubernetesApi(http.server.BaseHTTPRequestHandler):
    """Answers the TFJob and Pod calls `TrainingClient` makes; records every request."""

    def _reply(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _record(self) -> dict | None:
        length = int(self.headers.get('Content-Length') or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        parsed = urllib.parse.urlparse(self.path)
        self.server.requests.append(
            (self.command, parsed.path, urllib.parse.parse_qs(parsed.query), body)
        )
        return body

    def do_POST(self):
        body = self._record()
        self.server.job = body
        self._reply(201, body)

    def do_GET(self):
        self._record()
        path = urllib.parse.urlparse(self.path).path
        if path.endswith('/pods'):
            self._reply(
                200,
                {'apiVersion': 'v1', 'kind': 'PodList', 'metadata': {}, 'items': self.server.pods},
            )
            return
        if self.server.on_get is not None:
            self.server.on_get()
        statuses = self.server.statuses
        status = statuses.pop(0) if len(statuses) > 1 else statuses[0]
        self._reply(200, {**self.server.job, 'status': status})

    def do_DELETE(self):
        self._record()
        self._reply(200, {'kind': 'Status', 'apiVersion': 'v1', 'status': 'Success'})

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serve() -> Iterator[tuple[http.server.ThreadingHTTPServer, TrainingClient]]:
    """The fake server on a free loopback port, and a real `TrainingClient` pointed at it."""
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), _FakeKubernetesApi)
    server.requests, server.job, server.pods, server.statuses, server.on_get = (
        [],
        None,
        [],
        [{}],
        None,
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    configuration = k8s.Configuration(host=f'http://127.0.0.1:{server.server_port}')
    try:
        yield server, TrainingClient(client_configuration=configuration)
    finally:
        server.shutdown()
        server.server_close()


def condition(kind: str, message: str = '') -> dict:
    """A TFJob status condition of type `kind` (`Created`, `Running`, `Succeeded`, `Failed`) that holds."""
    return {'type': kind, 'status': 'True', 'reason': f'TFJob{kind}', 'message': message}


def failed_pod(
    job: str, replica_type: str, index: int, *, reason: str, exit_code: int, message: str = ''
) -> dict:
    """A Pod of `job` whose `tensorflow` container terminated as Kubernetes reports it."""
    return {
        'metadata': {
            'name': f'{job}-{replica_type}-{index}',
            'labels': {
                'training.kubeflow.org/job-name': job,
                'training.kubeflow.org/replica-type': replica_type,
                'training.kubeflow.org/replica-index': str(index),
            },
        },
        'status': {
            'phase': 'Failed',
            'containerStatuses': [
                {
                    'name': 'tensorflow',
                    'image': 'i',
                    'imageID': '',
                    'ready': False,
                    'restartCount': 0,
                    'state': {
                        'terminated': {'exitCode': exit_code, 'reason': reason, 'message': message}
                    },
                }
            ],
        },
    }
