"""`asynctrain run`: the whole pipeline on this machine, with progress and a closing summary.

The console shows asynctrain's own lines only; TensorFlow's, gRPC's, absl's and libprotobuf's go
to the run's log file (`console`), from the first import of TensorFlow on. `--verbose` shows them.

`asynctrain run --compiled pipeline.yaml` runs a compiled Kubeflow pipeline instead, task by task
as open-source KFP would (`compiled_run`), each task's output in its own log.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from asynctrain.components.shared.yaml_config import ConfigError
from asynctrain.pipelines import dataset
from asynctrain.pipelines.config import BUNDLED_DATA, load_config
from asynctrain.pipelines.kubeflow.local_backend import kfp_profiles


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        '--data',
        metavar='DIR',
        default=None,
        help=f'directory of CSV input (default: {BUNDLED_DATA}, the taxi sample '
        'that ships with TFX)',
    )
    parser.add_argument(
        '--work-dir',
        metavar='DIR',
        default=None,
        help='run directory; each pipeline keeps its artifacts, ML Metadata and pushed models in '
        'a folder of it named after the pipeline (default: ./runs/local)',
    )
    parser.add_argument(
        '--date',
        metavar='YYYY-MM-DD',
        default=None,
        help="one day's cycle: ExampleGen reads that day's span "
        '(the input pattern must hold {YYYY}{MM}{DD})',
    )
    parser.add_argument(
        '--accept-drift',
        metavar='FEATURE[,FEATURE]',
        default=None,
        help='accept the data drift of these features (or "all") for this run only: a known, '
        'intended change; the model trained on it is pushed when blessed, and later runs '
        'compare with it (drift.accept)',
    )
    parser.add_argument(
        '--config',
        metavar='FILE',
        default=None,
        help='pipeline configuration as YAML (fields of PipelineConfig)',
    )
    compiled = parser.add_argument_group(
        'a compiled pipeline (asynctrain compile --target kubeflow), run as open-source KFP would'
    )
    compiled.add_argument(
        '--compiled',
        metavar='PIPELINE_YAML',
        default=None,
        help='run this compiled PipelineSpec task by task instead of the config (refused with '
        "the KFP backend's reasons when a cluster would refuse it)",
    )
    compiled.add_argument(
        '--pipeline-root',
        metavar='URI',
        default=None,
        help="with --compiled: replaces the spec's defaultPipelineRoot (s3:// or minio://, at "
        'the S3 endpoint in AWS_ENDPOINT_URL, as the launcher stages artifacts only there)',
    )
    compiled.add_argument(
        '--kfp-version',
        choices=tuple(kfp_profiles.PROFILES),
        default=kfp_profiles.NEWEST,
        help='with --compiled: the open-source KFP line whose driver and launcher to follow: '
        '2.0 (2.0.x, Kubeflow 1.8), 2.5 (2.5.0-2.14.x) or 2.17 (2.15 and later; the default)',
    )
    compiled.add_argument(
        '--run-id', default=None, help='with --compiled: the run id (default: run-<time>-<hex>)'
    )
    compiled.add_argument(
        '--run-name',
        default='',
        help="with --compiled: the run's display name, {{$.pipeline_job_name}} in the steps "
        "(default: the KFP SDK's '<pipeline name> <local time>')",
    )
    compiled.add_argument(
        '--tfjob-local',
        action='store_true',
        help="with --compiled: the Trainer's TFJob (distribution.cluster: tfjob) runs as local "
        'processes instead of on a cluster',
    )
    compiled.add_argument(
        '--fresh-processes',
        action='store_true',
        help='with --compiled: start each task as a new process, as a pod would, instead of '
        'forking it from one that imported the task modules once (slower, same code)',
    )
    parser.add_argument(
        '--verbose',
        action='store_true',
        help="show TensorFlow's, gRPC's and Beam's output on the console too (it always goes to "
        'the log file)',
    )


def with_accepted_drift(config, accept: str | None):
    """`config` with `--accept-drift`'s features added to `drift.accept`."""
    if accept is None:
        return config
    names = tuple(name.strip() for name in accept.split(',') if name.strip())
    if not names:
        raise ConfigError('--accept-drift: expected feature names separated by commas, or all')
    drift = dataclasses.replace(config.drift, accept=tuple(config.drift.accept) + names)
    return dataclasses.replace(config, drift=drift)


def run(args: argparse.Namespace) -> int:
    if getattr(args, 'compiled', None):
        return run_compiled(args)
    try:
        config = load_config(args.config, data=args.data, work_dir=args.work_dir, date=args.date)
        config = with_accepted_drift(config, getattr(args, 'accept_drift', None))
        # The dataset's spec too (no TensorFlow yet): a bad one fails before the work directory
        # or its log exists. The run is wired over this one.
        loaded = dataset.load(config)
    except ConfigError as e:
        print(f'asynctrain run: invalid configuration: {e}', file=sys.stderr)
        return 2
    from asynctrain.components.shared import console
    from asynctrain.pipelines import work_dir_layout

    print(
        f'asynctrain: running pipeline {config.pipeline_name!r} on {config.data_dir}\n'
        f'            state {config.state_dir}',
        flush=True,
    )
    if work_dir_layout.is_shared(config.work_dir):
        print(work_dir_layout.shared_notice(config.work_dir), flush=True)
    verbose = getattr(args, 'verbose', False)
    log_path = console.new_log_path(config.state_dir)
    # From before TensorFlow's first import: its import-time lines go to the log too.
    with console.quiet(log_path, verbose):
        code, message, summary = _run(config, loaded, log_path, verbose)
    if message:
        print(message, file=sys.stderr)
    if summary is not None:
        print('\n' + summary.format())
    return code


def _run(config, loaded, log_path: str, verbose: bool) -> tuple[int, str, object]:
    """(exit code, message for the console, summary or None)."""
    from asynctrain.components.shared import console
    from asynctrain.pipelines.local_runner import PipelineRunError, run_local
    from asynctrain.pipelines.work_dir_lock import WorkDirBusyError

    try:
        return 0, '', run_local(config, log_path=log_path, verbose=verbose, loaded=loaded)
    except ConfigError as e:
        return 2, f'asynctrain run: invalid configuration: {e}', None
    except WorkDirBusyError as e:
        return 3, f'asynctrain run: {e}', None
    except PipelineRunError as e:
        lines = console.lines_that_matter(e.log_path or log_path, e.log_offset)
        shown = ''.join(f'\n    {line}' for line in lines)
        return (
            1,
            f'asynctrain run: {e}\n  log: {e.log_path or log_path}'
            + (f'\n  last lines that matter:{shown}' if lines else ''),
            None,
        )


def run_compiled(args: argparse.Namespace) -> int:
    """`--compiled`: exit 0 when every task succeeded, 1 when one failed, 2 when refused."""
    for flag in ('data', 'work_dir', 'date', 'config', 'accept_drift'):
        if getattr(args, flag, None):
            print(
                f'asynctrain run: --{flag.replace("_", "-")} does not apply with --compiled: the '
                'compiled spec holds its configuration (compile again to change it)',
                file=sys.stderr,
            )
            return 2
    from asynctrain.pipelines.kubeflow.compile import kfp_rules
    from asynctrain.pipelines.kubeflow.local_backend import compiled_run

    try:
        result = compiled_run.run_compiled(
            args.compiled,
            pipeline_root=args.pipeline_root,
            run_id=args.run_id,
            run_name=getattr(args, 'run_name', ''),
            tfjob_local=args.tfjob_local,
            fresh_processes=args.fresh_processes,
            kfp_version=getattr(args, 'kfp_version', kfp_profiles.NEWEST),
        )
    except (kfp_rules.PipelineRefused, ValueError, OSError) as e:
        print(f'asynctrain run: {args.compiled}: {e}', file=sys.stderr)
        return 2
    except compiled_run.CompiledTaskFailed as e:
        shown = ''.join(f'\n    {line}' for line in e.cause)
        print(
            f'asynctrain run: {e}\n  log: {e.log_path}'
            + (f'\n  last lines that matter:{shown}' if shown else ''),
            file=sys.stderr,
        )
        return 1
    print('\n' + result.format())
    return 0
