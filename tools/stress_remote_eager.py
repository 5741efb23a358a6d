"""Runs the scenario of the remote-eager flake N times and counts the failures.

The flake (issue 15): TensorFlow's `libprotobuf ERROR ... 'tensorflow.eager.Operation.device'
contains invalid UTF-8`, then a closure whose `fetch()` gave None. It struck the Trainer of the
"ours" pipeline with an in-process cluster, in a process that had already run Transform. Each run
here is that, in a fresh Python process: tf.Transform on Beam's DirectRunner over a small taxi
sample (the workload TFX's Transform executor runs), then `cluster.launch.train_and_export` with
an `in_process` cluster, in the same process.

    .venv/bin/python -m tools.stress_remote_eager --runs 30 --work-dir /tmp/stress

`--code-root` runs the scenario against another copy of this repository (for a before/after
comparison: `git archive OLD_COMMIT | tar -x -C DIR`). One line per run, then the failure rate;
each failed run's output is kept under `--work-dir`.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time

from asynctrain.components.shared import tf_environment

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Lines that mark the flake (or its consequences) in a run's output.
_SIGNS = (
    'contains invalid UTF-8',
    'Unable to parse request',
    "'NoneType' object is not subscriptable",
    'returned no result',
)


def run_scenario(work_dir: str, train_steps: int, steps_per_execution: int) -> None:
    """One run, in this process: Transform, then Trainer on an in-process cluster."""
    from asynctrain.components.trainer import config as config_lib
    from asynctrain.components.trainer.cluster import launch
    from tests.components.trainer import trainer_testdata

    data = trainer_testdata.make_transformed_data(
        os.path.join(work_dir, 'taxi'), num_train=1000, num_eval=200
    )
    config = config_lib.TrainerConfig(
        training=config_lib.TrainingConfig(
            train_steps=train_steps,
            batch_size=64,
            steps_per_execution=steps_per_execution,
            checkpoint_interval_steps=train_steps // 2,
            summary_interval_steps=steps_per_execution * 2,
        )
    )
    report = launch.train_and_export(
        data.examples,
        data.transform_graph,
        os.path.join(work_dir, 'model', 'Format-Serving'),
        os.path.join(work_dir, 'model_run'),
        config,
        trainer_testdata.LABEL_KEY,
    )
    if report.steps < train_steps:
        raise RuntimeError(f'trained {report.steps} steps; expected {train_steps}')
    print(f'scenario done: {report.steps} steps, eval {report.eval}', flush=True)


def _child_env(code_root: str) -> dict:
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join(p for p in (code_root, env.get('PYTHONPATH', '')) if p)
    return tf_environment.configure(env)


def stress(
    runs: int,
    work_dir: str,
    code_root: str,
    train_steps: int,
    steps_per_execution: int,
    timeout_seconds: float,
) -> int:
    """Runs the scenario `runs` times, one fresh process after another; returns the failures."""
    os.makedirs(work_dir, exist_ok=True)
    failures = 0
    for number in range(1, runs + 1):
        run_dir = os.path.join(work_dir, f'run-{number:03d}')
        os.makedirs(run_dir, exist_ok=True)
        log_path = os.path.join(run_dir, 'output.log')
        command = [
            sys.executable,
            '-m',
            'tools.stress_remote_eager',
            '--once',
            run_dir,
            '--train-steps',
            str(train_steps),
            '--steps-per-execution',
            str(steps_per_execution),
        ]
        started = time.monotonic()
        with open(log_path, 'w', encoding='utf-8') as log:
            try:
                code = subprocess.run(
                    command,
                    cwd=code_root,
                    env=_child_env(code_root),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    timeout=timeout_seconds,
                    check=False,
                ).returncode
            except subprocess.TimeoutExpired:
                code = 'timeout'
        with open(log_path, encoding='utf-8', errors='replace') as log:
            output = log.read()
        signs = [s for s in _SIGNS if s in output]
        failed = code != 0 or bool(signs)
        failures += failed
        # The last exception line says what failed.
        errors = re.findall(r'^\w*(?:Error|Exception|Failed)\w*: .*$', output, re.MULTILINE)
        detail = (errors[-1][:160] if errors else '') if failed else ''
        print(
            f'run {number}/{runs}: {"FAILED" if failed else "ok"} (exit {code}, '
            f'{time.monotonic() - started:.0f} s) {", ".join(signs)} {detail}'.rstrip(),
            flush=True,
        )
    print(f'{failures} failed of {runs} ({failures / max(runs, 1):.0%}); code: {code_root}')
    return failures


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--runs', type=int, default=30)
    parser.add_argument('--work-dir', default='/tmp/stress_remote_eager')
    parser.add_argument('--code-root', default=_REPO_ROOT)
    parser.add_argument('--train-steps', type=int, default=60)
    parser.add_argument('--steps-per-execution', type=int, default=5)
    parser.add_argument('--timeout-seconds', type=float, default=900)
    parser.add_argument('--once', metavar='RUN_DIR', help='run the scenario once, here')
    args = parser.parse_args(argv)
    if args.once:
        run_scenario(args.once, args.train_steps, args.steps_per_execution)
        return 0
    failures = stress(
        args.runs,
        args.work_dir,
        os.path.abspath(args.code_root),
        args.train_steps,
        args.steps_per_execution,
        args.timeout_seconds,
    )
    return 1 if failures else 0


if __name__ == '__main__':
    tf_environment.configure()
    sys.exit(main())
