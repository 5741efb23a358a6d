"""One run at a time per work directory: two LocalDagRunner runs would race on one SQLite store.

Kept free of TFX imports so the lock is taken before anything heavy loads.
"""

from __future__ import annotations

import contextlib
import fcntl
import os


class WorkDirBusyError(RuntimeError):
    """Another run holds the work directory; two runs would race on one ML Metadata store."""


@contextlib.contextmanager
def exclusive_work_dir(work_dir: str):
    """Holds an exclusive lock on `work_dir` for one run; a second run fails at once, clearly."""
    os.makedirs(work_dir, exist_ok=True)
    path = os.path.join(work_dir, '.run.lock')
    with open(path, 'a+') as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or 'unknown'
            raise WorkDirBusyError(
                f'another asynctrain run (pid {holder}) is using {work_dir}; wait for it to '
                'finish or choose another --work-dir'
            ) from None
        lock.seek(0)
        lock.truncate()
        lock.write(str(os.getpid()))
        lock.flush()
        try:
            yield
        finally:
            lock.seek(0)
            lock.truncate()
            fcntl.flock(lock, fcntl.LOCK_UN)
