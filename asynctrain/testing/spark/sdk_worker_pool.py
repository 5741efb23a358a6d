"""The cluster's pool of Beam Python SDK workers: Beam's `BeamFnExternalWorkerPool` service
(`--environment_type=EXTERNAL`), each worker a process of its own forked from a fork server that
imported Beam, TensorFlow and the pipeline's libraries once.

Beam's own pool (`apache_beam.runners.worker.worker_pool_main`, with processes) starts each worker
as a new interpreter (`python -c "...SdkHarness(...).run()"`), which then imports Beam and, as it
unpickles the stage's transforms, TensorFlow, TensorFlow Transform and the rest: several seconds
of CPU per worker, paid again for every executor of every application. Here the worker is the same
`SdkHarness`, with the same arguments (control endpoint, worker id, no state cache, no data
buffer time limit), in a child forked from `asynctrain.components.shared.fork_server`, whose
children start with those modules loaded and nothing run: a fresh process for every worker, as
before.

    python -m asynctrain.testing.spark.sdk_worker_pool --service_port PORT
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import subprocess
import sys
import threading
import traceback

# This module's name (`__name__` is `__main__` in the pool's process).
_MODULE = 'asynctrain.testing.spark.sdk_worker_pool'
# What a worker of our pipelines loads to run their stages.
PRELOAD = (
    'apache_beam',
    'apache_beam.runners.worker.sdk_worker',
    'tensorflow',
    'tensorflow_transform.beam',
    'tensorflow_data_validation',
    'tfx_bsl.public.tfxio',
    'asynctrain.components.example_gen.executor',
    'asynctrain.components.example_batcher.executor',
    'asynctrain.components.evaluator.executor',
)


def _servicer_class():
    from apache_beam.portability.api import beam_fn_api_pb2, beam_fn_api_pb2_grpc

    class ForkingWorkerPool(beam_fn_api_pb2_grpc.BeamFnExternalWorkerPoolServicer):
        """StartWorker forks a worker from the fork server; StopWorker stops it."""

        def __init__(self, forks):
            self._forks = forks
            self._workers = {}
            # Workers whose id a later StartWorker reused (executors of different applications
            # ask with the same ids): Beam's pool forgets them and they end with their control
            # stream; here they are kept until they end, since a dropped handle kills its child.
            self._replaced = []
            self._lock = threading.Lock()

        def StartWorker(self, request, context):  # noqa: N802 - the service's method name.
            try:
                worker = self._forks.start(
                    ['-m', _MODULE, '--worker', request.control_endpoint.url, request.worker_id],
                    dict(os.environ),
                )
                with self._lock:
                    self._replaced = [w for w in self._replaced if w.poll() is None]
                    if request.worker_id in self._workers:
                        self._replaced.append(self._workers[request.worker_id])
                    self._workers[request.worker_id] = worker
                return beam_fn_api_pb2.StartWorkerResponse()
            except Exception:  # noqa: BLE001 - the job server reads the error in the response.
                return beam_fn_api_pb2.StartWorkerResponse(error=traceback.format_exc())

        def StopWorker(self, request, context):  # noqa: N802
            with self._lock:
                worker = self._workers.pop(request.worker_id, None)
            if worker is not None:
                worker.terminate()
                try:
                    worker.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    worker.kill()
                    worker.wait()
            return beam_fn_api_pb2.StopWorkerResponse()

    return ForkingWorkerPool


def serve(port: int) -> None:
    """Serves the pool on `port` until the process is stopped."""
    import grpc
    from apache_beam.portability.api import beam_fn_api_pb2_grpc

    from asynctrain.components.shared import fork_server

    forks = fork_server.ForkServer(PRELOAD, dict(os.environ))
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=16))
    beam_fn_api_pb2_grpc.add_BeamFnExternalWorkerPoolServicer_to_server(
        _servicer_class()(forks), server
    )
    server.add_insecure_port(f'[::]:{port}')
    server.start()
    server.wait_for_termination()


def _run_worker(control_url: str, worker_id: str) -> None:
    from apache_beam.runners.worker.sdk_worker import SdkHarness

    # Beam's pool's arguments (`worker_pool_main`): no state cache, no data buffer time limit.
    SdkHarness(
        control_url, worker_id=worker_id, state_cache_size=0, data_buffer_time_limit_ms=-1
    ).run()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog=f'python -m {_MODULE}')
    parser.add_argument('--service_port', type=int, help='serve the pool on this port')
    parser.add_argument('--worker', nargs=2, metavar=('CONTROL_URL', 'WORKER_ID'))
    args = parser.parse_args(argv)
    if args.worker:
        _run_worker(*args.worker)
    elif args.service_port:
        serve(args.service_port)
    else:
        parser.error('--service_port or --worker is required')


if __name__ == '__main__':
    main(sys.argv[1:])
