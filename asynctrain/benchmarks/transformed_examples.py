"""The transformed taxi examples that `asynctrain bench input` and `asynctrain bench ps` train on,
and our task over them.

A sample of the bundled taxi CSV is transformed by the stock Transform executor running our
`preprocessing_fn` (or an earlier Transform's output is read, `--transformed-examples` and
`--transform-graph`), and its train split is resampled, whole rows at a time, to any number of
examples written as Transform writes them: one `tf.Example` per record, sharded GZIP TFRecords.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import time

DEFAULT_SAMPLE_ROWS = 6000
# The bench's default batch: the Trainer's default (`training.batch_size`).
BATCH_SIZE = 2048
STEPS_PER_EXECUTION = 50


@dataclasses.dataclass(frozen=True)
class TransformedExamples:
    """Transformed taxi examples laid out as Transform writes them.

    Attributes:
      examples_dir: `Split-train/` (the resampled shards) and `Split-eval/`.
      transform_graph: Transform's output: transform_fn, transformed_metadata, metadata.
      label_key: The transformed label.
      num_examples: Examples in `Split-train/`.
      num_files: Shards in `Split-train/`.
      bytes: Size of `Split-train/` on disk.
      seconds: Time to make all of it (Transform and resampling).
    """

    examples_dir: str
    transform_graph: str
    label_key: str
    num_examples: int
    num_files: int
    bytes: int
    seconds: float


@dataclasses.dataclass(frozen=True)
class TransformOutput:
    """An earlier Transform run's output, to resample instead of running Transform again.

    Attributes:
      transformed_examples: Its `transformed_examples` artifact's directory (`Split-train/` and
        `Split-eval/`, GZIP TFRecords of transformed tf.Examples).
      transform_graph: Its `transform_graph` artifact's directory (`transform_fn/`,
        `transformed_metadata/` and the raw `metadata/`).
    """

    transformed_examples: str
    transform_graph: str


def add_data_arguments(
    parser: argparse.ArgumentParser, *, examples: int, sample_rows: int, batch_size: int
) -> None:
    """The training benches' data flags, with these defaults: `--batch-size` (examples per step
    on each worker), `--examples` (transformed examples generated), `--sample-rows` (taxi rows
    the Transform executor transforms, then resampled), and `add_transform_output_arguments`."""
    parser.add_argument(
        '--batch-size',
        type=int,
        default=batch_size,
        help=f'examples per step on each worker (default {batch_size})',
    )
    parser.add_argument(
        '--examples',
        type=int,
        default=examples,
        help=f'transformed examples to generate (default {examples:,})',
    )
    parser.add_argument(
        '--sample-rows',
        type=int,
        default=sample_rows,
        help='taxi rows transformed by the Transform executor, then resampled '
        f'(default {sample_rows})',
    )
    add_transform_output_arguments(parser)


def add_transform_output_arguments(parser: argparse.ArgumentParser) -> None:
    """`--transformed-examples` and `--transform-graph`: the benches' data from an earlier
    Transform run (a pipeline run's, say) instead of `--sample-rows` rows transformed afresh."""
    for flag, what in (
        ('--transformed-examples', 'transformed examples (Split-train/, Split-eval/)'),
        ('--transform-graph', 'transform graph'),
    ):
        parser.add_argument(
            flag,
            metavar='DIR',
            help=f"an earlier Transform's {what} of the taxi features: resampled instead of "
            'transforming --sample-rows taxi rows; give both flags or neither',
        )


def transform_output_from_args(args: argparse.Namespace) -> TransformOutput | None:
    """The `TransformOutput` the two flags name, or None when neither is given.

    Raises:
      ValueError: only one of the flags is given, or a directory is missing.
    """
    examples, graph = args.transformed_examples, args.transform_graph
    if examples is None and graph is None:
        return None
    if examples is None or graph is None:
        raise ValueError('--transformed-examples and --transform-graph: give both or neither')
    for flag, path in (('--transformed-examples', examples), ('--transform-graph', graph)):
        if not os.path.isdir(path):
            raise ValueError(f'{flag}: no directory at {path}')
    return TransformOutput(os.path.abspath(examples), os.path.abspath(graph))


def describe_source(
    transform_output: TransformOutput | None, num_examples: int, sample_rows: int
) -> str:
    """The progress line saying where the examples come from and how many are made."""
    if transform_output:
        return f'resampling {transform_output.transformed_examples} to {num_examples:,} examples'
    return f'transforming {sample_rows:,} taxi rows, resampling to {num_examples:,} examples'


def source_fields(transform_output: TransformOutput | None, sample_rows: int) -> dict:
    """The result's record of the source: taxi rows transformed, or the Transform output read."""
    return {
        'sample_rows_transformed': None if transform_output else sample_rows,
        'transformed_examples': transform_output.transformed_examples if transform_output else None,
    }


def make_transformed_examples(
    output_dir: str,
    num_examples: int,
    sample_rows: int = DEFAULT_SAMPLE_ROWS,
    num_files: int = 8,
    seed: int = 0,
    transform_output: TransformOutput | None = None,
) -> TransformedExamples:
    """Transforms `sample_rows` taxi rows with the stock Transform executor and our
    `preprocessing_fn`, then writes `num_examples` rows resampled from its train split.

    With `transform_output`, its train split is resampled instead (no Transform run; it is only
    read) and its eval split copied, and `sample_rows` is unused.

    Resampling is vectorized (Arrow `take`, tfx-bsl's C++ encoder), so a million examples take
    seconds rather than the minutes a Beam run over a million raw rows would.
    """
    from asynctrain.components.transform import feature_config as fc
    from asynctrain.testing import transform_runs as runs

    started = time.monotonic()
    config = fc.load_feature_config(str(runs.TAXI_FEATURES), str(runs.TAXI_SCHEMA))
    if transform_output is None:
        transform_output = _transform_sample(output_dir, sample_rows, seed, config)
    transformed = transform_output.transformed_examples
    examples_dir = os.path.join(output_dir, 'examples')
    train_dir = os.path.join(examples_dir, 'Split-train')
    os.makedirs(train_dir)
    shutil.copytree(
        os.path.join(transformed, 'Split-eval'), os.path.join(examples_dir, 'Split-eval')
    )
    _write_resampled(
        os.path.join(transformed, 'Split-train', '*'), train_dir, num_examples, num_files, seed
    )
    size = sum(os.path.getsize(os.path.join(train_dir, f)) for f in os.listdir(train_dir))
    return TransformedExamples(
        examples_dir=examples_dir,
        transform_graph=transform_output.transform_graph,
        label_key=config.label.name,
        num_examples=num_examples,
        num_files=num_files,
        bytes=size,
        seconds=time.monotonic() - started,
    )


def _transform_sample(output_dir: str, sample_rows: int, seed: int, config) -> TransformOutput:
    """Runs the stock Transform executor on `sample_rows` taxi rows; returns its output."""
    from asynctrain.components.shared import feature_types
    from asynctrain.testing import transform_runs as runs

    raw_uri = runs.write_span(
        os.path.join(output_dir, 'raw'),
        1,
        runs.resample_span(
            runs.read_taxi_table(feature_types.load_schema(str(runs.TAXI_SCHEMA))),
            1,
            sample_rows,
            seed,
        ),
    )
    transform = runs.run_transform(
        [runs.examples_artifact(raw_uri, 1)],
        runs.schema_artifact(runs.TAXI_SCHEMA, os.path.join(output_dir, 'schema')),
        os.path.join(output_dir, 'transform'),
        config,
        disable_analyzer_cache=True,
        disable_statistics=True,
    )
    return TransformOutput(transform.transformed_examples[0], transform.transform_graph)


def _write_resampled(
    source_pattern: str, train_dir: str, num_examples: int, num_files: int, seed: int
) -> None:
    """Writes `num_examples` records drawn with replacement from `source_pattern`'s, in shards."""
    import numpy as np
    import pyarrow as pa
    import tensorflow as tf
    from tfx_bsl.coders import example_coder

    from asynctrain.testing import transform_runs as runs

    sample = example_coder.ExamplesToRecordBatchDecoder().DecodeBatch(
        runs.read_tfrecord_gzip(source_pattern)
    )
    rng = np.random.default_rng(seed)
    # zlib level 1 keeps generation fast; reading (inflate) costs about the same at any level.
    options = tf.io.TFRecordOptions(compression_type='GZIP', compression_level=1)
    per_file = -(-num_examples // num_files)
    for index in range(num_files):
        count = min(per_file, num_examples - index * per_file)
        path = os.path.join(train_dir, f'data_tfrecord-{index:05d}-of-{num_files:05d}.gz')
        with tf.io.TFRecordWriter(path, options) as writer:
            for start in range(0, count, 100_000):
                picks = rng.integers(0, sample.num_rows, min(100_000, count - start))
                for record in example_coder.RecordBatchToExamples(sample.take(pa.array(picks))):
                    writer.write(record)


def make_task(
    data: TransformedExamples,
    hidden_units: tuple[int, ...] = (64, 32),
    trainer_config=None,
    batch_size: int = BATCH_SIZE,
):
    """Our task (model, optimizer, step, inputs) over `data`, with the Trainer's defaults."""
    from asynctrain.components.trainer import config as config_lib
    from asynctrain.components.trainer.training import task as task_lib
    from asynctrain.components.trainer.training import tasks

    schema = task_lib.load_transformed_schema(data.transform_graph, data.label_key)
    config = trainer_config or config_lib.TrainerConfig(
        model=config_lib.ModelConfig(hidden_units=tuple(hidden_units)),
        training=config_lib.TrainingConfig(
            batch_size=batch_size, steps_per_execution=STEPS_PER_EXECUTION
        ),
    )
    return tasks.BinaryClassificationTask(schema, config)
