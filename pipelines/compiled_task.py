"""Runs the tasks of `asynctrain run --compiled`: each container command `python -m MODULE ARG...`
as `__main__` in a process of its own, forked from one that imported the task modules once.

TFX's Kubeflow V2 entrypoint imports every TFX component, kfp's client and TensorFlow before it
runs anything: 15-20 s of CPU per task on a 2-core machine, most of a small pipeline's time. A
server process (`--serve`) pays that once; for each task it forks a child that sets the task's
environment, sends its output to the task's log and runs the module with the task's arguments,
as `python -m` would. The server is a process of its own, started before any task runs, so that
no child inherits a running TensorFlow runtime or gRPC server (forking one would be unsafe).

With `tfjob_log_dir`, the Trainer's `tfjob` cluster mode runs its TFJob's replicas as local
processes (`components.trainer.kubernetes.local`), each with the `TF_CONFIG` the Training
Operator would give it, instead of submitting the job to a cluster.

Protocol: one JSON request per line on stdin (`argv`, `env`, `log_path`, `tfjob_log_dir`), one
JSON reply per line on stdout (`returncode`).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import runpy
import sys
import traceback


def run_module_argv(argv: list[str], tfjob_log_dir: str | None) -> None:
    """Runs `-m MODULE ARG...` (argv without the interpreter) in this process as `__main__`."""
    if argv[:1] != ['-m'] or len(argv) < 2:
        raise ValueError(f'expected -m MODULE ARG..., got {argv[:3]}')
    if tfjob_log_dir:
        from components.trainer import executor as trainer_executor
        from components.trainer.kubernetes import local

        trainer_executor.tfjob_runner = local.runner(tfjob_log_dir)
    module = argv[1]
    sys.argv = [module, *argv[2:]]
    runpy.run_module(module, run_name='__main__', alter_sys=True)


def _child(request: dict) -> None:
    """In the forked child: the task's environment and log, then its module. Never returns."""
    code = 1
    try:
        fd = os.open(request['log_path'], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        sys.stdout = os.fdopen(1, 'w', buffering=1)
        sys.stderr = os.fdopen(2, 'w', buffering=1)
        os.environ.clear()
        os.environ.update(request['env'])
        run_module_argv(request['argv'], request.get('tfjob_log_dir'))
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # The task's failure, written to its log for the runner to show.
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def serve(modules: list[str]) -> None:
    """Imports `modules`, then forks a child per request until stdin closes."""
    for module in modules:
        importlib.import_module(module)
    replies = sys.stdout
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request)
        _, status = os.waitpid(pid, 0)
        replies.write(json.dumps({'returncode': os.waitstatus_to_exitcode(status)}) + '\n')
        replies.flush()


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog='python -m pipelines.compiled_task')
    parser.add_argument('--serve', action='store_true', help='read task requests from stdin')
    parser.add_argument('--preload', action='append', default=[], help='module to import first')
    args = parser.parse_args(argv)
    if not args.serve:
        parser.error('--serve is required')
    serve(args.preload)


if __name__ == '__main__':
    main(sys.argv[1:])
