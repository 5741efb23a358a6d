"""What a child process does with its command, its parent and its end: `-m MODULE ARG...` run in
the child as `python -m` would run it (`run_module_argv`), death with the process that started it
(`die_with_parent`), and an exit with the command's status that runs none of the parent's exit
handlers (`exit_with_status`); on the parent's side, starting such a child from a thread that
lasts as long as the process (`start_from_lasting_thread`). The fork servers (`asynctrain.components.shared.fork_server`, the
local KFP backend's task processes in
`asynctrain.pipelines.kubeflow.local_backend.compiled_task`) fork their children from a process
that has already imported what commands need."""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import os
import queue
import runpy
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from typing import NoReturn, TypeVar

T = TypeVar('T')

_PR_SET_PDEATHSIG = 1
# Set in a child's environment by the process that starts it: that process's pid.
PARENT_PID_VARIABLE = 'ASYNCTRAIN_PARENT_PID'


def _load_prctl():
    with contextlib.suppress(OSError, AttributeError):
        return ctypes.CDLL('libc.so.6', use_errno=True).prctl
    return None


def die_with_parent() -> None:
    """Called first by a child whose environment names its parent (`PARENT_PID_VARIABLE`, set
    by `servers.spawn` and the fork servers): it must not outlive the process that started it.
    On Linux the kernel sends it SIGKILL when its parent dies, even by SIGKILL, so killing a
    trainer leaves no orphaned servers holding ports; if the parent died before this call, the
    child exits at once. Elsewhere, or in a process whose environment names no parent, a no-op."""
    parent = os.environ.get(PARENT_PID_VARIABLE)
    if parent is None:
        return
    prctl = _load_prctl()
    if prctl is None:
        return
    prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != int(parent):
        os._exit(1)


class _LastingThread:
    """One daemon thread, started at its first call, that runs the calls handed to it and ends
    only with the process.

    Not a `ThreadPoolExecutor`: its workers are joined by `concurrent.futures`' exit hook
    (`threading._register_atexit`), which runs before the interpreter's other exit handlers, so
    the children started from it would be SIGKILLed while the process still shuts down (a server
    pool still stopping its servers, a trainer still writing its report). A daemon thread is
    never joined: it ends when the process does."""

    def __init__(self):
        self._lock = threading.Lock()
        self._calls: queue.SimpleQueue | None = None

    def run(self, call: Callable[[], T]) -> T:
        with self._lock:
            if self._calls is None:
                self._calls = queue.SimpleQueue()
                threading.Thread(
                    target=self._serve, args=(self._calls,), name='child-starter', daemon=True
                ).start()
        done: concurrent.futures.Future = concurrent.futures.Future()
        self._calls.put((call, done))
        return done.result()

    @staticmethod
    def _serve(calls: queue.SimpleQueue) -> None:
        while True:
            call, done = calls.get()
            try:
                done.set_result(call())
            except BaseException as error:  # handed to the caller's thread
                done.set_exception(error)


_STARTER = _LastingThread()


def start_from_lasting_thread(start: Callable[[], T]) -> T:
    """`start()` (which starts a child that calls `die_with_parent`), called on a thread that
    ends only with this process; its result.

    Why: the kernel sends the parent-death signal when the *thread* that created the child ends,
    not the process (prctl(2), PR_SET_PDEATHSIG: "the 'parent' in this case is considered to be
    the thread that created this process"). A server restarted from a short-lived thread (a
    bench's disruption, a watcher) was SIGKILLed as soon as that thread returned: its worker
    was seen back by the coordinator, then lost again for good. The main thread lasts as long as
    the process, so it starts children itself."""
    if threading.current_thread() is threading.main_thread():
        return start()
    return _STARTER.run(start)


def run_module_argv(argv: list[str]) -> None:
    """Runs `-m MODULE ARG...` (argv without the interpreter) in this process as `__main__`."""
    if argv[:1] != ['-m'] or len(argv) < 2:
        raise ValueError(f'expected -m MODULE ARG..., got {argv[:3]}')
    module = argv[1]
    sys.argv = [module, *argv[2:]]
    runpy.run_module(module, run_name='__main__', alter_sys=True)


def exit_with_status(body: Callable[[], None], failure: int = 1) -> NoReturn:
    """Calls `body`, then ends the process at once (`os._exit`, after flushing the standard
    streams): 0 when it returned, `SystemExit`'s code when it raised that (as the interpreter
    maps it), else `failure`, with the exception's traceback printed to stderr."""
    code = failure
    try:
        body()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # The command's failure, written where its output goes.
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
