"""What a forked child does with its command and its end: `-m MODULE ARG...` run in the child as
`python -m` would run it (`run_module_argv`), and an exit with the command's status that runs
none of the parent's exit handlers (`exit_with_status`). The local KFP backend's task processes
(`asynctrain.pipelines.kubeflow.local_backend.compiled_task`) and the test suite's fork server
(`tests/fork_server.py`) both fork from a process that has already imported what commands need."""

from __future__ import annotations

import os
import runpy
import sys
import traceback
from collections.abc import Callable
from typing import NoReturn


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
