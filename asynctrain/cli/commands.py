"""The commands and benches of `asynctrain`, each a module with `add_arguments(parser)` and
`run(args) -> int`.

Each entry's loader imports its module when the command runs, not when the command line starts:
`asynctrain --help` and `asynctrain init` never pay for TensorFlow or TFX. The imports are real
`import` statements inside the loaders, so the import graph (`tools/import_graph.py`) sees every
edge from the command line down.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from types import ModuleType


@dataclasses.dataclass(frozen=True)
class Command:
    """One subcommand: what `--help` says, and the loader of the module that runs it."""

    help: str
    load: Callable[[], ModuleType]


def _init() -> ModuleType:
    from asynctrain.pipelines.init import init_command

    return init_command


def _run() -> ModuleType:
    from asynctrain.cli import run_command

    return run_command


def _examplegen() -> ModuleType:
    from asynctrain.components.example_gen import cli

    return cli


def _train() -> ModuleType:
    from asynctrain.components.trainer import cli

    return cli


def _compile() -> ModuleType:
    from asynctrain.pipelines.kubeflow.compile import compile_command

    return compile_command


def _schedule() -> ModuleType:
    from asynctrain.pipelines.kubeflow.compile import schedule

    return schedule


def _docs() -> ModuleType:
    from asynctrain.docs_generation import docs_command

    return docs_command


COMMANDS = {
    'init': Command('Propose a schema, preprocessing and config from CSV.', _init),
    'run': Command('Run the whole pipeline locally with LocalDagRunner.', _run),
    'examplegen': Command('Convert CSV to TFRecord tf.Examples.', _examplegen),
    'train': Command('Train outside a pipeline, or as one TF_CONFIG replica.', _train),
    'compile': Command('Compile the pipeline for Kubeflow or Vertex AI.', _compile),
    'schedule': Command('Create a KFP recurring run of the compiled pipeline.', _schedule),
    'docs': Command('Write the generated pages of docs/, or --check them.', _docs),
}


def _bench_examplegen() -> ModuleType:
    from asynctrain.benchmarks import examplegen

    return examplegen


def _bench_transform() -> ModuleType:
    from asynctrain.benchmarks import transform

    return transform


def _bench_input() -> ModuleType:
    from asynctrain.benchmarks import input_pipeline

    return input_pipeline


def _bench_ps() -> ModuleType:
    from asynctrain.benchmarks import parameter_server

    return parameter_server


def _bench_async() -> ModuleType:
    from asynctrain.benchmarks import async_training

    return async_training


def _bench_pipeline() -> ModuleType:
    from asynctrain.benchmarks import pipeline

    return pipeline


def _bench_preprocess() -> ModuleType:
    from asynctrain.benchmarks import preprocess

    return preprocess


def _bench_batcher() -> ModuleType:
    from asynctrain.benchmarks import batcher

    return batcher


def _bench_evaluator() -> ModuleType:
    from asynctrain.benchmarks import evaluator

    return evaluator


def _bench_recsys_data() -> ModuleType:
    from asynctrain.benchmarks import recsys_data

    return recsys_data


def _bench_recsys() -> ModuleType:
    from asynctrain.benchmarks import recsys

    return recsys


BENCHMARKS = {
    'examplegen': Command('Our ExampleGen vs stock CsvExampleGen.', _bench_examplegen),
    'transform': Command('Transform with vs without the analyzer cache.', _bench_transform),
    'input': Command('Input pipelines vs the in-memory upper bound.', _bench_input),
    'ps': Command('ParameterServerStrategy scaling.', _bench_ps),
    'async': Command(
        'Asynchronous parameter servers on emulated unequal hosts, scenario by scenario.',
        _bench_async,
    ),
    'pipeline': Command('Whole pipeline: ours vs stock components.', _bench_pipeline),
    'preprocess': Command(
        'Transform graph applied by the ExampleBatcher vs materialized.', _bench_preprocess
    ),
    'batcher': Command(
        'ExampleBatcher: one process vs its Beam pipeline, time and peak memory.', _bench_batcher
    ),
    'evaluator': Command(
        'Evaluator with slices and plots: ours vs stock TFMA, time and peak memory.',
        _bench_evaluator,
    ),
    'recsys-data': Command(
        'A Criteo-like click dataset with a planted signal and its AUC ceiling.',
        _bench_recsys_data,
    ),
    'recsys': Command(
        'Embedding tables on parameter servers: our loop vs model.fit by table size and PS count.',
        _bench_recsys,
    ),
}
