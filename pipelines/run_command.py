"""`asynctrain run`: the whole pipeline on this machine, with progress and a closing summary.

The console shows asynctrain's own lines only; TensorFlow's, gRPC's, absl's and libprotobuf's go
to the run's log file (`console`), from the first import of TensorFlow on. `--verbose` shows them.
"""

from __future__ import annotations

import argparse
import sys

from pipelines import dataset_spec
from pipelines.config import BUNDLED_DATA, ConfigError, load_config


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
        help='run directory: artifacts, ML Metadata, pushed model (default: ./runs/local)',
    )
    parser.add_argument(
        '--date',
        metavar='YYYY-MM-DD',
        default=None,
        help="one day's cycle: ExampleGen reads that day's span "
        '(the input pattern must hold {YYYY}{MM}{DD})',
    )
    parser.add_argument(
        '--config',
        metavar='FILE',
        default=None,
        help='pipeline configuration as YAML (fields of PipelineConfig)',
    )
    parser.add_argument(
        '--verbose',
        action='store_true',
        help="show TensorFlow's, gRPC's and Beam's output on the console too (it always goes to "
        'the log file)',
    )


def run(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config, data=args.data, work_dir=args.work_dir, date=args.date)
        # The dataset's spec too (no TensorFlow yet): a bad one fails before the work directory
        # or its log exists.
        dataset_spec.load(config)
    except ConfigError as e:
        print(f'asynctrain run: invalid configuration: {e}', file=sys.stderr)
        return 2
    from components import console

    print(
        f'asynctrain: running pipeline {config.pipeline_name!r} on {config.data_dir}\n'
        f'            work dir {config.work_dir}',
        flush=True,
    )
    verbose = getattr(args, 'verbose', False)
    log_path = console.new_log_path(config.work_dir)
    # From before TensorFlow's first import: its import-time lines go to the log too.
    with console.quiet(log_path, verbose):
        code, message, summary = _run(config, log_path, verbose)
    if message:
        print(message, file=sys.stderr)
    if summary is not None:
        print('\n' + summary.format())
    return code


def _run(config, log_path: str, verbose: bool) -> tuple[int, str, object]:
    """(exit code, message for the console, summary or None)."""
    from components import console
    from components.transform.feature_config import FeatureConfigError
    from pipelines.local_runner import PipelineRunError, run_local
    from pipelines.work_dir_lock import WorkDirBusyError

    try:
        return 0, '', run_local(config, log_path=log_path, verbose=verbose)
    except (ConfigError, FeatureConfigError) as e:
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
