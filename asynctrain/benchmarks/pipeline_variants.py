"""The two pipelines `asynctrain bench pipeline` compares and the config and dataset they share,
each pipeline run in the process that runs it (the bench's child), and what is read back from ML
Metadata: each component's wall-clock interval.

`ours` is `create_pipeline(config, dataset.load(config))` run by `asynctrain run`'s local runner; `stock` is the same
graph built here from the same pieces with stock components (see
`asynctrain.benchmarks.pipeline` for what differs and how the two are compared).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Sequence

from asynctrain.testing import child_runs

_MB = 1 << 20


def bench_config(
    input_dir: str,
    work_dir: str,
    train_steps: int,
    name: str,
    beam_args: Sequence[str] = (),
    dataset: str | None = None,
):
    """The pipeline config both variants share (ours reads all of it, stock what applies)."""
    from asynctrain.pipelines.config import load_config

    return load_config(
        None,
        data=input_dir,
        work_dir=work_dir,
        pipeline_name=name,
        dataset=dataset,
        trainer={'training': {'train_steps': train_steps}},
        beam_pipeline_args=list(beam_args) or None,
    )


def write_dataset(directory: str, features: Sequence[str]) -> str:
    """The taxi dataset (schema and feature config) with only `features` transformed, written to
    `directory`; a ValueError names any feature the taxi feature config lacks."""
    import yaml

    from asynctrain.pipelines.config import BUNDLED_SCHEMAS

    taxi = BUNDLED_SCHEMAS / 'taxi'
    spec = yaml.safe_load((taxi / 'features.yaml').read_text())
    known = [f['name'] for f in spec['features']]
    unknown = sorted(set(features) - set(known))
    if unknown:
        raise ValueError(
            f'--features: {unknown} not in {taxi / "features.yaml"}; its features: {known}'
        )
    spec['features'] = [f for f in spec['features'] if f['name'] in features]
    os.makedirs(directory, exist_ok=True)
    shutil.copy(taxi / 'schema.pbtxt', os.path.join(directory, 'schema.pbtxt'))
    with open(os.path.join(directory, 'features.yaml'), 'w') as f:
        yaml.safe_dump(spec, f, sort_keys=False)
    return directory


def stock_pipeline(config, metadata_connection_config):
    """Stock CsvExampleGen and Trainer (reference run_fn) in the graph `create_pipeline` wires."""
    from tfx import v1 as tfx

    return tfx.dsl.Pipeline(
        pipeline_name=config.pipeline_name,
        pipeline_root=config.pipeline_root,
        components=stock_components(config),
        enable_cache=False,
        metadata_connection_config=metadata_connection_config,
        beam_pipeline_args=list(config.beam_pipeline_args),
    )


def stock_components(config) -> list:
    """The stock pipeline's eight components, in pipeline order, wired as ours are."""
    import dataclasses

    from tfx import v1 as tfx

    from asynctrain.components.transform import preprocessing
    from asynctrain.pipelines import dataset, tfma_config
    from asynctrain.pipelines import pipeline as pipeline_lib

    loaded = dataset.load(config)
    features = dataclasses.replace(loaded.features, label=loaded.label)
    example_gen = tfx.components.CsvExampleGen(
        input_base=config.data_dir,
        input_config=pipeline_lib.input_config(config),
        output_config=pipeline_lib.output_config(config),
    )
    statistics_gen = tfx.components.StatisticsGen(examples=example_gen.outputs['examples'])
    schema_gen = tfx.components.ImportSchemaGen(schema_file=config.schema_path)
    example_validator = tfx.components.ExampleValidator(
        statistics=statistics_gen.outputs['statistics'], schema=schema_gen.outputs['schema']
    )
    transform = tfx.components.Transform(
        examples=example_gen.outputs['examples'],
        schema=schema_gen.outputs['schema'],
        preprocessing_fn=pipeline_lib.PREPROCESSING_FN,
        custom_config=preprocessing.config_to_custom_config(features),
    )
    trainer = stock_trainer(config, loaded.label.key, transform, schema_gen)
    evaluator = tfx.components.Evaluator(
        examples=example_gen.outputs['examples'],
        model=trainer.outputs['model'],
        eval_config=tfma_config.eval_config(config, loaded.label),
    )
    pusher = tfx.components.Pusher(
        model=trainer.outputs['model'],
        model_blessing=evaluator.outputs['blessing'],
        push_destination=tfx.proto.PushDestination(
            filesystem=tfx.proto.PushDestination.Filesystem(base_directory=config.serving_dir)
        ),
    )
    return [
        example_gen,
        statistics_gen,
        schema_gen,
        example_validator,
        transform,
        trainer,
        evaluator,
        pusher,
    ]


def stock_trainer(config, label_key: str, transform, schema_gen):
    """Stock Trainer running the reference `run_fn` (`model.fit`) with our model's settings."""
    from tfx import v1 as tfx

    from asynctrain.benchmarks import reference_trainer

    training = config.trainer.training
    return tfx.components.Trainer(
        run_fn='asynctrain.benchmarks.reference_trainer.run_fn',
        examples=transform.outputs['transformed_examples'],
        transform_graph=transform.outputs['transform_graph'],
        schema=schema_gen.outputs['schema'],
        train_args=tfx.proto.TrainArgs(num_steps=training.train_steps),
        eval_args=tfx.proto.EvalArgs(num_steps=10),
        custom_config={
            reference_trainer.LABEL_KEY: label_key,
            reference_trainer.BATCH_SIZE: training.batch_size,
            reference_trainer.HIDDEN_UNITS: list(config.trainer.model.hidden_units),
        },
    )


def component_intervals(config) -> dict[str, tuple[float, float]]:
    """Each component's execution, from its creation to its last update in ML Metadata (driver,
    executor and publisher), as wall-clock (start, end) seconds."""
    from tfx.orchestration import metadata

    prefix = f'{config.pipeline_name}.'
    intervals = {}
    connection = metadata.sqlite_metadata_connection_config(config.metadata_path)
    with metadata.Metadata(connection) as m:
        for execution in m.store.get_executions():
            for context in m.store.get_contexts_by_execution(execution.id):
                if context.name.startswith(prefix):
                    intervals[context.name[len(prefix) :]] = (
                        execution.create_time_since_epoch / 1000.0,
                        execution.last_update_time_since_epoch / 1000.0,
                    )
    return intervals


def run_variant(
    variant: str,
    input_dir: str,
    work_dir: str,
    train_steps: int,
    beam_args: Sequence[str] = (),
    dataset: str | None = None,
) -> dict:
    """Runs one pipeline in this process; returns its total and per-component seconds."""
    config = bench_config(input_dir, work_dir, train_steps, f'bench-{variant}', beam_args, dataset)
    sampler = child_runs.TreeRssSampler().start()
    started, started_wall = time.monotonic(), time.time()
    if variant == 'ours':
        from asynctrain.pipelines.local_runner import run_local

        summary = run_local(config, out=sys.stderr)
    else:
        summary = run_stock(config, started_wall)
    total = time.monotonic() - started
    samples = sampler.stop()
    intervals = component_intervals(config)
    return {
        'total_seconds': total,
        'component_seconds': {name: end - start for name, (start, end) in intervals.items()},
        'component_peak_mb': child_runs.component_peaks_mb(samples, intervals),
        'component_order': sorted(intervals, key=lambda name: intervals[name][0]),
        'beam_pipeline_args': list(config.beam_pipeline_args),
        'baseline_mb': round(samples.rss[0] / _MB, 1),
        'peak_mb': round(max(samples.rss) / _MB, 1),
        'blessed': summary.blessed,
        'eval_metric': summary.eval_metric,
        'executed': len(summary.executed),
    }


def run_stock(config, started_wall: float):
    """Runs the stock pipeline under LocalDagRunner, logged as `asynctrain run` logs; its summary."""
    from tfx import v1 as tfx

    from asynctrain.pipelines import local_runner, run_summary

    os.makedirs(config.work_dir, exist_ok=True)
    pipeline = stock_pipeline(
        config,
        tfx.orchestration.metadata.sqlite_metadata_connection_config(config.metadata_path),
    )
    progress = local_runner.ComponentProgress([c.id for c in pipeline.components], sys.stderr)
    os.makedirs(os.path.join(config.work_dir, 'logs'), exist_ok=True)
    # The same log routing as `asynctrain run`: TFX's logs to a file, progress lines out.
    with local_runner._component_logs(os.path.join(config.work_dir, 'logs', 'run.log'), progress):
        tfx.orchestration.LocalDagRunner().run(pipeline)
    return run_summary.read_summary(config, started_wall)
