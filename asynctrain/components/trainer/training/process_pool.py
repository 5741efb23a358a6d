"""The one pool of threads on which every TensorFlow server of a process runs its functions, sized
for good by the process's first server.

`ComputePool` (tensorflow/core/common_runtime/process_util.cc) is a static: the first caller
creates it with its `inter_op_parallelism_threads` (0: the number of cores, or
`TF_NUM_INTEROP_THREADS`), and `GrpcServer::Init` (tensorflow/core/distributed_runtime/rpc/grpc_server_lib.cc)
takes it for every server of the process. The first server may be an in-process worker or
parameter server, or the coordinator's own server, which `ParameterServerStrategy` starts when it
connects, with the eager context's settings (0 unless the user set them).

An in-process cluster of n workers needs n + 1 of those threads: each worker's step holds one while
its input needs another. After a smaller first server, a 2-worker in-process cluster hung in its
first steps, every time, on this 2-core machine: after a 1-worker in-process cluster (a pool of 2),
and after a `local_processes` coordinator (a pool of 2, the core count). That is how a pytest
worker that had run the recsys bench (a `local_processes` coordinator) hung in the next in-process
training (`tests/components/trainer/training/process_pool_test.py` runs both orders).

So the first server of the process, whichever kind, makes a pool of at least `POOL_THREADS`, and
an in-process cluster the pool cannot serve is refused by field instead of hanging.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

# The least threads of the process's pool: room for in-process clusters of up to 7 workers.
POOL_THREADS = 8
# The pool's size once this process's first server has created it.
_pool_threads: int | None = None


def in_process_server_threads(num_workers: int, server_threads: int = 0) -> int:
    """The inter-op threads to give the servers of an in-process cluster of `num_workers`: for the
    process's first servers, the largest of `server_threads`, `num_workers + 1` and
    `POOL_THREADS`; after that, the pool's size, which they share.

    Raises:
      ValueError: the process's pool has fewer than `num_workers + 1` threads.
    """
    needed = num_workers + 1
    if _pool_threads is None:
        return max(server_threads, needed, POOL_THREADS)
    if _pool_threads < needed:
        raise ValueError(
            f'distribution.num_workers: {num_workers} in-process workers need {needed} threads '
            f"of TensorFlow's pool, and this process's first server made it {_pool_threads} "
            'threads: that cluster would hang here; use cluster: local_processes, or train it '
            'in a new process'
        )
    return _pool_threads


def pool_threads() -> int | None:
    """The size of this process's pool of server threads; None while no server has started."""
    return _pool_threads


def record_servers(threads: int) -> None:
    """Notes that this process started servers with `threads` inter-op threads: the first ones
    sized the pool."""
    global _pool_threads
    if _pool_threads is None:
        _pool_threads = threads


@contextlib.contextmanager
def coordinator_server() -> Iterator[None]:
    """Around `ParameterServerStrategy`'s connection: when the coordinator's own server is the
    first of the process (a `local_processes` or `tf_config` coordinator), its pool gets
    `POOL_THREADS` threads, unless the user chose a size (`tf.config.threading`).

    That server's settings are a copy of the eager context's (`default_session_config` in
    `connect_to_cluster`, tensorflow/python/eager/remote.py), whose inter-op count is set only if
    the user set it; the context cannot be reconfigured once it exists, so its inter-op field
    holds `POOL_THREADS` while the strategy connects. (`TF_NUM_INTEROP_THREADS`, set for the
    connection, did not reach the pool in a process whose eager context had started before: the
    pool got the core count.)"""
    if _pool_threads is not None:
        yield
        return
    from tensorflow.python.eager import context

    settings = context.context()
    chosen = settings._inter_op_parallelism_threads
    if chosen is None:
        settings._inter_op_parallelism_threads = POOL_THREADS
    try:
        yield
    finally:
        if chosen is None:
            settings._inter_op_parallelism_threads = None
    record_servers(chosen or POOL_THREADS)
