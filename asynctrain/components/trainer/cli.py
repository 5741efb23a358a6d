"""`asynctrain train`: the Trainer outside a TFX pipeline, and what every Kubernetes replica runs.

    asynctrain train --examples DIR --transform-graph DIR --output DIR --label-key LABEL \
        [--config FILE] [--base-model DIR]
    asynctrain train --examples DIR --transform-graph DIR \
        --serving-model-dir DIR --model-run-dir DIR --label-key LABEL [--config FILE]

`--examples` is a transformed Examples artifact directory (`Split-train/`, `Split-eval/`),
`--transform-graph` Transform's output, `--label-key` the transformed label feature (the
dataset's label; no default). The serving SavedModel goes to `<output>/model/Format-Serving` (the
Model artifact's layout) and summaries, checkpoints and
`training_report.json` to `<output>/model_run/`; rerunning with the same `--output` resumes from
the latest checkpoint. `--serving-model-dir` and `--model-run-dir` override those two places (the
Trainer's executor points them at its Model and ModelRun artifacts); with both, `--output` may be
left out. `--config` is YAML, a local path or a URI TensorFlow's file system reads (`gs://...`):
a pipeline config with a `trainer:` section, or that section alone.

With `TF_CONFIG` set, the process is the task it names: the chief trains (cluster mode
`tf_config`), a worker or parameter server starts its server and waits until it is stopped.
Also runnable as `python -m asynctrain.components.trainer.cli ...`.

The console shows asynctrain's own lines (the live training line, the report, errors); everything
TensorFlow, gRPC, absl and libprotobuf write, from this process and the cluster processes it
starts, goes to the log file: `--log-file`, by default `<model_run_dir>/logs/train-*.log` (in the
temporary directory when the model run directory is not local). `--verbose` keeps it all on the
console, as does a TFJob replica (`TF_CONFIG` set) without `--log-file`: its console is the pod's
log.
"""

from __future__ import annotations

from asynctrain.components.shared import tf_environment

tf_environment.configure()  # Before TensorFlow is imported anywhere in the process.

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402

# console is shared with `asynctrain run` (stdlib only): fd 2 to the log, and the log's lines
# that matter; object_store the local copies of the store where TensorFlow cannot open it.
from asynctrain.components.shared import console, object_store  # noqa: E402
from asynctrain.components.trainer import config as config_lib  # noqa: E402
from asynctrain.components.trainer import train_arguments  # noqa: E402
from asynctrain.components.trainer.cluster import servers as cluster_lib  # noqa: E402


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds `train`'s arguments to `parser` (the main CLI mounts it as a subcommand): the flags
    `train_arguments.TrainArguments` declares, the same the TFJob's replicas are given."""
    train_arguments.add_arguments(parser)
    parser.add_argument(
        '--log-file',
        metavar='FILE',
        default=None,
        help="where TensorFlow's, gRPC's and absl's output goes (default: "
        '<model_run_dir>/logs/train-YYYYmmdd-HHMMSS.log)',
    )
    parser.add_argument(
        '--verbose',
        action='store_true',
        help="show TensorFlow's, gRPC's and absl's output on the console instead of a log file",
    )
    # `run` checks what argparse cannot (the output flags depend on each other) and reports it
    # through this parser, with the usage line, the way argparse reports its own errors.
    parser.set_defaults(_train_parser=parser)


def output_dirs(args: argparse.Namespace) -> tuple[str, str]:
    """The serving model and model run directories the arguments name.

    Raises:
      ValueError: neither `--output` nor both of `--serving-model-dir` and `--model-run-dir`.
    """
    missing = [
        flag
        for flag, value in (
            ('--serving-model-dir', args.serving_model_dir),
            ('--model-run-dir', args.model_run_dir),
        )
        if not value
    ]
    if not args.output and missing:
        raise ValueError(
            f'--output is required unless --serving-model-dir and --model-run-dir '
            f'are both given (missing: {" and ".join(missing)})'
        )
    return (
        args.serving_model_dir
        or os.path.join(args.output, train_arguments.MODEL_SUBDIR, train_arguments.SERVING_SUBDIR),
        args.model_run_dir or os.path.join(args.output, train_arguments.MODEL_RUN_SUBDIR),
    )


def load_config(path: str | None) -> config_lib.TrainerConfig:
    """The TrainerConfig in a YAML file (its `trainer:` section if it has one)."""
    return config_lib.load(path)


def log_path(args: argparse.Namespace, model_run_dir: str, task_type: str | None) -> str | None:
    """The log file that TensorFlow's output goes to, its directory created; None to keep that
    output on the console (`--verbose`, or a TF_CONFIG replica without `--log-file`)."""
    if getattr(args, 'verbose', False):
        return None
    log_file = getattr(args, 'log_file', None)
    if log_file:
        os.makedirs(os.path.dirname(os.path.abspath(log_file)), exist_ok=True)
        return log_file
    if task_type is not None:
        return None
    local = '://' not in model_run_dir
    return console.new_log_path(model_run_dir if local else tempfile.gettempdir(), 'train')


# The flags that name what `train` reads, and what it writes (pulled too: a rerun resumes).
_INPUT_FLAGS = ('examples', 'transform_graph', 'base_model', 'config')
_OUTPUT_FLAGS = ('output', 'serving_model_dir', 'model_run_dir')


def _mirror_store_arguments(
    args: argparse.Namespace, task_type: str | None
) -> tuple[object_store.Mirror, list[str]]:
    """Points each flag that names the store, where this line's TensorFlow cannot open it, at a
    local copy (`object_store.Mirror`), in place; returns the mirror and the output URIs to push
    once training ends. Every replica maps a URI to the same local path, so the files the chief
    names in a dataset are the worker's own copies. A parameter server reads only the config; a
    worker writes nothing."""
    mirror = object_store.Mirror()
    wanted = {cluster_lib.PS: ('config',), cluster_lib.WORKER: _INPUT_FLAGS}.get(
        task_type, _INPUT_FLAGS + _OUTPUT_FLAGS
    )
    outputs = []
    for flag in wanted:
        value = getattr(args, flag, None)
        if isinstance(value, str) and object_store.needs_mirror(value):
            setattr(args, flag, mirror.pull(value))
            if flag in _OUTPUT_FLAGS:
                outputs.append(value)
    return mirror, outputs


def run(args: argparse.Namespace) -> int:
    """Runs `train` as parsed by `add_arguments`; returns the exit code."""
    # A replica of a Kubeflow step reads and writes the step's artifacts in the object store:
    # through TensorFlow where it opens the store, else through local copies of them.
    # A flag left on the store then names what this task never reads.
    mirror, outputs = _mirror_store_arguments(args, cluster_lib.task_from_tf_config()[0])
    values = [str(value) for value in vars(args).values()]
    tf_environment.register_filesystems(v for v in values if not object_store.needs_mirror(v))
    try:
        return _run(args)
    finally:
        # Checkpoints too when training failed: the retry resumes from them.
        for uri in outputs:
            mirror.push(uri)


def _run(args: argparse.Namespace) -> int:
    try:
        serving_model_dir, model_run_dir = output_dirs(args)
    except ValueError as e:
        args._train_parser.error(str(e))
    try:
        trainer_config = load_config(args.config)
        if args.profile_steps:
            start_step, num_steps = train_arguments.parse_profile_steps(args.profile_steps)
            profile = config_lib.ProfileConfig(start_step=start_step, num_steps=num_steps)
            trainer_config = dataclasses.replace(trainer_config, profile=profile)
    except (OSError, ValueError) as e:
        print(f'asynctrain train: {e}', file=sys.stderr)
        return 2
    task_type, task_id = cluster_lib.task_from_tf_config()
    if task_type not in (None, cluster_lib.CHIEF, cluster_lib.WORKER, cluster_lib.PS):
        print(
            f'asynctrain train: TF_CONFIG task type {task_type!r} is not supported; allowed: '
            f'{[cluster_lib.CHIEF, cluster_lib.WORKER, cluster_lib.PS]}',
            file=sys.stderr,
        )
        return 2
    if task_type is None and trainer_config.distribution.cluster == 'tfjob':
        print(
            'asynctrain train: trainer.distribution.cluster: tfjob is run by the Trainer '
            "component's executor, which submits a TFJob whose replicas run this command with "
            'TF_CONFIG; without TF_CONFIG, allowed: in_process, local_processes',
            file=sys.stderr,
        )
        return 2
    # Only once the arguments are known good: a refused command leaves no log behind.
    log = log_path(args, model_run_dir, task_type)
    if log:
        print(f'asynctrain train: log {log}', flush=True)
    if task_type in (cluster_lib.WORKER, cluster_lib.PS):
        cluster_spec = json.loads(os.environ['TF_CONFIG'])['cluster']
        with console.quiet(log or '', verbose=log is None):
            logging.info('Serving as %s %d', task_type, task_id)
            cluster_lib.serve_forever(
                cluster_spec, task_type, task_id, trainer_config.distribution.server_threads
            )
        return 0
    if task_type == cluster_lib.CHIEF:
        trainer_config = config_lib.in_tf_config_mode(trainer_config)
    # From before TensorFlow's first import: its import-time lines go to the log too. The
    # messages for the console are printed once fd 2 is the console again.
    with console.quiet(log or '', verbose=log is None):
        code, message = _train(args, trainer_config, serving_model_dir, model_run_dir, log)
    if message:
        print(message, file=sys.stderr)
    return code


def _train(
    args: argparse.Namespace,
    trainer_config: config_lib.TrainerConfig,
    serving_model_dir: str,
    model_run_dir: str,
    log: str | None,
) -> tuple[int, str]:
    """Trains and exports; (exit code, message for the console). The report is printed on stdout
    as one JSON line, the last one."""
    from asynctrain.components.trainer.cluster import launch, recovery

    offset = console.log_size(log) if log else 0
    try:
        report = launch.train_and_export(
            examples_dir=args.examples,
            transform_graph_dir=args.transform_graph,
            serving_model_dir=serving_model_dir,
            model_run_dir=model_run_dir,
            trainer_config=trainer_config,
            label_key=args.label_key,
            base_model_dir=args.base_model,
        )
    except Exception as e:
        if not recovery.is_retryable(e):
            if not log:
                raise
            # Quiet: the traceback goes to the log, the console gets its telling lines.
            logging.exception('Training failed')
            sys.stderr.flush()
            lines = ''.join(f'\n    {line}' for line in console.lines_that_matter(log, offset))
            return 1, (
                f'asynctrain train: failed: {type(e).__name__}: {e}\n  log: {log}'
                + (f'\n  last lines that matter:{lines}' if lines else '')
            )
        # A lost parameter server: the status a TFJob's `ExitCode` restart policy retries, so
        # the chief's pod restarts and resumes from the last checkpoint.
        logging.exception('Lost the cluster')
        return recovery.EXIT_RETRYABLE, (
            f'asynctrain train: lost the cluster ({type(e).__name__}); exit '
            f'{recovery.EXIT_RETRYABLE} so that a restart resumes from the last checkpoint'
        )
    print(json.dumps(dataclasses.asdict(report), sort_keys=True), flush=True)
    return 0, ''


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog='asynctrain train',
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    logging.basicConfig(level=logging.INFO)
    return run(parser.parse_args(argv))


def exit_now(code: int) -> None:
    """Ends a training process once its outputs are written. Normal interpreter teardown runs
    ClusterCoordinator's destructor against the cluster, which was seen to take minutes after a
    long run; nothing is left that the OS does not clean up."""
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(code)


if __name__ == '__main__':
    exit_now(main())
