"""The `asynctrain` command line (also `python -m asynctrain`).

    asynctrain init       from a CSV directory and a target column to reviewed pipeline files
    asynctrain run        the whole pipeline locally (LocalDagRunner) on the bundled data
    asynctrain examplegen CSV -> TFRecord tf.Examples outside a pipeline (same Beam transform)
    asynctrain train      the Trainer outside a pipeline; with TF_CONFIG, one replica of a TFJob
    asynctrain compile    the pipeline for Kubeflow Pipelines or Vertex AI
    asynctrain schedule   a KFP recurring run of the compiled pipeline
    asynctrain bench ...  side-by-side benchmarks
    asynctrain docs       the generated pages of docs/ (configuration reference, bench tables)

Each subcommand lives in a module that defines `add_arguments(parser)` and `run(args) -> int`;
modules are imported only when their command runs, so `--help` stays fast.
"""

from __future__ import annotations

import os

from asynctrain.components.shared import tf_environment  # noqa: E402

tf_environment.configure()  # Before TensorFlow is imported anywhere in the process.
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import warnings  # noqa: E402

# google-api-core warns at import that Python 3.10 support is ending; TFX 1.16 requires 3.10.
warnings.filterwarnings('ignore', category=FutureWarning, module=r'google\..*')

import argparse  # noqa: E402
import importlib  # noqa: E402
import logging  # noqa: E402
import sys  # noqa: E402
from collections.abc import Sequence  # noqa: E402

COMMANDS = {
    'init': (
        'asynctrain.pipelines.init.init_command',
        'Propose a schema, preprocessing and config from CSV.',
    ),
    'run': (
        'asynctrain.pipelines.cli.run_command',
        'Run the whole pipeline locally with LocalDagRunner.',
    ),
    'examplegen': ('asynctrain.components.example_gen.cli', 'Convert CSV to TFRecord tf.Examples.'),
    'train': (
        'asynctrain.components.trainer.cli',
        'Train outside a pipeline, or as one TF_CONFIG replica.',
    ),
    'compile': (
        'asynctrain.pipelines.kubeflow.compile.compile_command',
        'Compile the pipeline for Kubeflow or Vertex AI.',
    ),
    'schedule': (
        'asynctrain.pipelines.kubeflow.compile.schedule',
        'Create a KFP recurring run of the compiled pipeline.',
    ),
    'docs': (
        'asynctrain.docs_generation.docs_command',
        'Write the generated pages of docs/, or --check them.',
    ),
}
BENCHMARKS = {
    'examplegen': ('asynctrain.benchmarks.examplegen', 'Our ExampleGen vs stock CsvExampleGen.'),
    'transform': (
        'asynctrain.benchmarks.transform',
        'Transform with vs without the analyzer cache.',
    ),
    'input': (
        'asynctrain.benchmarks.input_pipeline',
        'Input pipelines vs the in-memory upper bound.',
    ),
    'ps': ('asynctrain.benchmarks.parameter_server', 'ParameterServerStrategy scaling.'),
    'async': (
        'asynctrain.benchmarks.async_training',
        'Asynchronous parameter servers on emulated unequal hosts, scenario by scenario.',
    ),
    'pipeline': ('asynctrain.benchmarks.pipeline', 'Whole pipeline: ours vs stock components.'),
    'preprocess': (
        'asynctrain.benchmarks.preprocess',
        'Transform graph applied by the ExampleBatcher vs materialized.',
    ),
    'batcher': (
        'asynctrain.benchmarks.batcher',
        'ExampleBatcher: one process vs its Beam pipeline, time and peak memory.',
    ),
    'evaluator': (
        'asynctrain.benchmarks.evaluator',
        'Evaluator with slices and plots: ours vs stock TFMA, time and peak memory.',
    ),
    'recsys-data': (
        'asynctrain.benchmarks.recsys_data',
        'A Criteo-like click dataset with a planted signal and its AUC ceiling.',
    ),
    'recsys': (
        'asynctrain.benchmarks.recsys',
        'Embedding tables on parameter servers: our loop vs model.fit by table size and PS count.',
    ),
}


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='asynctrain', description='TFX pipeline components for production training.'
    )
    sub = parser.add_subparsers(dest='command', required=True, metavar='COMMAND')
    for name, (module, help_text) in COMMANDS.items():
        command = sub.add_parser(name, help=help_text, description=help_text)
        command.set_defaults(_module=module)
        if argv and argv[0] == name:
            importlib.import_module(module).add_arguments(command)
    bench = sub.add_parser('bench', help='Side-by-side benchmarks.')
    bench_sub = bench.add_subparsers(dest='benchmark', required=True, metavar='BENCHMARK')
    for name, (module, help_text) in BENCHMARKS.items():
        command = bench_sub.add_parser(name, help=help_text, description=help_text)
        command.set_defaults(_module=module)
        if len(argv) > 1 and argv[0] == 'bench' and argv[1] == name:
            importlib.import_module(module).add_arguments(command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Arguments after `--` go to Beam untouched (for `examplegen` and the benches).
    extra: list[str] = []
    if '--' in argv:
        split = argv.index('--')
        argv, extra = argv[:split], argv[split + 1 :]
    args = build_parser(argv).parse_args(argv)
    args.beam_args = [*(getattr(args, 'beam_args', None) or []), *extra]
    return int(importlib.import_module(args._module).run(args) or 0)


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
