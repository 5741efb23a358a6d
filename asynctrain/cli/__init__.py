"""The `asynctrain` command line (also `python -m asynctrain`).

    asynctrain init       from a CSV directory and a target column to reviewed pipeline files
    asynctrain run        the whole pipeline locally (LocalDagRunner) on the bundled data
    asynctrain examplegen CSV -> TFRecord tf.Examples outside a pipeline (same Beam transform)
    asynctrain train      the Trainer outside a pipeline; with TF_CONFIG, one replica of a TFJob
    asynctrain compile    the pipeline for Kubeflow Pipelines or Vertex AI
    asynctrain schedule   a KFP recurring run of the compiled pipeline
    asynctrain bench ...  side-by-side benchmarks
    asynctrain docs       the generated pages of docs/ (configuration reference, bench tables)

Each subcommand lives in a module that defines `add_arguments(parser)` and `run(args) -> int`,
listed in `commands`; modules are imported only when their command runs, so `--help` stays fast.
Importing this package sets nothing: `main` sets the process's environment first
(`configure_process`), before any command module imports TensorFlow.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

from asynctrain.cli.commands import BENCHMARKS, COMMANDS
from asynctrain.components.shared import tf_environment


def configure_process() -> None:
    """The environment a command runs in, set before any command module (and so TensorFlow) is
    imported; by `main`, never at import, so importing the command line changes nothing."""
    tf_environment.configure()
    os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
    # google-api-core warns at import that Python 3.10 support is ending; TFX 1.16 requires 3.10.
    warnings.filterwarnings('ignore', category=FutureWarning, module=r'google\..*')


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='asynctrain', description='TFX pipeline components for production training.'
    )
    sub = parser.add_subparsers(dest='command', required=True, metavar='COMMAND')
    for name, entry in COMMANDS.items():
        command = sub.add_parser(name, help=entry.help, description=entry.help)
        command.set_defaults(_load=entry.load)
        if argv and argv[0] == name:
            entry.load().add_arguments(command)
    bench = sub.add_parser('bench', help='Side-by-side benchmarks.')
    bench_sub = bench.add_subparsers(dest='benchmark', required=True, metavar='BENCHMARK')
    for name, entry in BENCHMARKS.items():
        command = bench_sub.add_parser(name, help=entry.help, description=entry.help)
        command.set_defaults(_load=entry.load)
        if len(argv) > 1 and argv[0] == 'bench' and argv[1] == name:
            entry.load().add_arguments(command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    configure_process()
    argv = list(sys.argv[1:] if argv is None else argv)
    # Arguments after `--` go to Beam untouched (for `examplegen` and the benches).
    extra: list[str] = []
    if '--' in argv:
        split = argv.index('--')
        argv, extra = argv[:split], argv[split + 1 :]
    args = build_parser(argv).parse_args(argv)
    args.beam_args = [*(getattr(args, 'beam_args', None) or []), *extra]
    module: ModuleType = args._load()
    return int(module.run(args) or 0)


def entrypoint() -> None:
    """The `asynctrain` console script: `main`, then an immediate exit once outputs are written.

    A ParameterServerStrategy cluster's coordinator can take minutes to tear down at interpreter
    exit after a long run; everything is written and flushed by then, so the process ends at once.
    """
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(code)


if __name__ == '__main__':
    entrypoint()
