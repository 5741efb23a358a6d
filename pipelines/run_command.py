"""`asynctrain run`: the whole pipeline on this machine, with progress and a closing summary."""

from __future__ import annotations

import argparse
import sys

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


def run(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config, data=args.data, work_dir=args.work_dir, date=args.date)
    except ConfigError as e:
        print(f'asynctrain run: invalid configuration: {e}', file=sys.stderr)
        return 2
    from pipelines.local_runner import PipelineRunError, run_local
    from pipelines.work_dir_lock import WorkDirBusyError

    print(
        f'asynctrain: running pipeline {config.pipeline_name!r} on {config.data_dir}\n'
        f'            work dir {config.work_dir}',
        flush=True,
    )
    from components.transform.feature_config import FeatureConfigError

    try:
        summary = run_local(config)
    except (ConfigError, FeatureConfigError) as e:
        print(f'asynctrain run: invalid configuration: {e}', file=sys.stderr)
        return 2
    except WorkDirBusyError as e:
        print(f'asynctrain run: {e}', file=sys.stderr)
        return 3
    except PipelineRunError as e:
        print(f'asynctrain run: {e}', file=sys.stderr)
        return 1
    print('\n' + summary.format())
    return 0
