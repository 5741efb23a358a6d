"""Data built once per test run and shared by every pytest-xdist worker."""

from __future__ import annotations

import fcntl
import os
import pickle
import tempfile
from collections.abc import Callable
from typing import TypeVar

T = TypeVar('T')


def built_once(tmp_path_factory, name: str, make: Callable[[str], T]) -> T:
    """`make(directory)`, run once for the whole test run and shared by its pytest-xdist workers.

    A session fixture is per worker: data that several workers' tests read (a tf.Transform run,
    a trained model) would otherwise be built by each of them. The first worker to ask builds it
    under the run's base directory, holding a lock; the others wait, then read its result (which
    must pickle). Only for outputs the tests read: a part a test deletes must have no other
    reader (`TrainedModel.transform_graph`, the trained model's private copy, which one test
    deletes and no other test reads).
    """
    if not os.environ.get('PYTEST_XDIST_WORKER'):
        return make(str(tmp_path_factory.mktemp(name)))
    run_dir = tmp_path_factory.getbasetemp().parent  # One per run, shared by its workers.
    with open(run_dir / f'{name}.lock', 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        result_path = run_dir / f'{name}.pickle'
        if result_path.exists():
            return pickle.loads(result_path.read_bytes())
        # A directory of its own per attempt: a worker whose build failed leaves no half-made one
        # in the way of the next worker's attempt.
        result = make(tempfile.mkdtemp(prefix=f'{name}-', dir=run_dir))
        result_path.write_bytes(pickle.dumps(result))
        return result


def write_taxi_sample(directory, rows: int) -> None:
    """`directory/data.csv`: the header and the first `rows` rows of the bundled taxi CSV."""
    from asynctrain.pipelines.config import bundled_data_dir

    with (
        open(os.path.join(bundled_data_dir(), 'data.csv'), newline='') as src,
        open(os.path.join(directory, 'data.csv'), 'w', newline='') as dst,
    ):
        for i, line in enumerate(src):
            if i > rows:
                break
            dst.write(line)
