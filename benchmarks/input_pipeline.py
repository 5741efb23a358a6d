"""`asynctrain bench input`: does training wait for input? Four input pipelines, one model.

Data: a sample of the bundled taxi CSV is transformed by the stock Transform executor running our
`preprocessing_fn` (as the pipeline does), and its transformed train split is resampled, with
replacement and whole rows at a time, to `--examples` transformed tf.Examples written as sharded
GZIP TFRecords: real transformed values, the pipeline's record layout, at any size in seconds.

The same model (`components.trainer.model`, the Trainer's default widths) trains the same number
of steps, batch 256, fed by:

1. `upper_bound`: one parsed batch held in memory, fed to every step: no I/O, no parsing, no
   iterator, no indexing. Our step in a `tf.function` running `steps_per_execution` steps per
   call.
2. `ours`: the Trainer's per-worker dataset (`components.trainer.data.make_dataset`, defaults of
   `InputConfig`, no cache) feeding that same step function.
2b. `ours_cached`: the same with `input.cache: memory`, timed after one full epoch (which parses
   and fills the cache, and is reported on its own as `first_epoch_examples_per_sec`): what every
   epoch after the first runs at when the transformed split fits in memory.
3. `tfx`: what TFX's examples do: `data_accessor.tf_dataset_factory` (the factory stock Trainer
   hands to `run_fn`, built here from the artifact exactly as stock Trainer builds it) feeding
   `model.fit` with Keras's defaults; the model compiled with the same optimizer and loss.
4. `naive`: records read one at a time, parsed one at a time (`parse_single_example`), stacked into
   a batch in Python, no prefetch, and an eager (not `tf.function`) train step.

The input stall is the share of step time spent waiting for the next batch. For 1, 2 and 4 it is
measured in the loop (timestamps around `next(iterator)`, as the Trainer reports it). `model.fit`
gives no such hook, so for 3 it is derived: 1 - rate(fit on the dataset) / rate(the same fit on
the in-memory batches), i.e. the time per step that the dataset adds.

A sweep over hidden widths (upper bound and ours only) shows where the model stops being
input-bound; the input pipelines' rates alone (no model) say where the crossover should be.

Compare ratios, not absolute rates: the machine may be shared, and here input and compute share
the same CPU cores, so they can overlap only as far as cores are idle.

    asynctrain bench input [--examples N] [--steps N] [--output DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sys
import time

from benchmarks import report

DEFAULT_OUTPUT = os.path.join('bench_out', 'input')
DEFAULT_EXAMPLES = 1_000_000
DEFAULT_STEPS = 2000
# The naive pipeline runs about 1,000 examples/s here; its rate is steady after a few steps, so
# it runs fewer (reported as its own `steps`) to keep the bench within minutes.
DEFAULT_NAIVE_STEPS = 30
DEFAULT_SAMPLE_ROWS = 6000
BATCH_SIZE = 256
STEPS_PER_EXECUTION = 50
# In-memory batches `model.fit` cycles through to derive the tfx variant's stall.
FIT_IN_MEMORY_BATCHES = 16
VARIANTS = ('upper_bound', 'ours', 'ours_cached', 'tfx', 'naive')
# Hidden layers of the sweep, small (input-bound) to large (compute-bound). The first is the
# Trainer's default model.
SWEEP = ((64, 32), (256, 128), (1024, 512), (2048, 1024))
# Ours counts as "not input-bound" at this stall, the profiler's threshold.
NOT_INPUT_BOUND_STALL = 0.05


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        '--examples',
        type=int,
        default=DEFAULT_EXAMPLES,
        help=f'transformed examples to generate (default {DEFAULT_EXAMPLES:,})',
    )
    parser.add_argument(
        '--steps',
        type=int,
        default=DEFAULT_STEPS,
        help=f'timed train steps per variant (default {DEFAULT_STEPS}); the '
        'model sweep runs an eighth of them per width',
    )
    parser.add_argument(
        '--naive-steps',
        type=int,
        default=DEFAULT_NAIVE_STEPS,
        help=f'timed steps of the naive pipeline (default {DEFAULT_NAIVE_STEPS})',
    )
    parser.add_argument(
        '--sweep',
        nargs='+',
        default=[','.join(map(str, w)) for w in SWEEP],
        metavar='UNITS',
        help='hidden layers of each model in the sweep, e.g. 64,32 2048,1024 '
        f'(default {" ".join(",".join(map(str, w)) for w in SWEEP)})',
    )
    parser.add_argument(
        '--sample-rows',
        type=int,
        default=DEFAULT_SAMPLE_ROWS,
        help='taxi rows transformed by the Transform executor, then resampled '
        f'(default {DEFAULT_SAMPLE_ROWS})',
    )
    parser.add_argument(
        '--output',
        default=DEFAULT_OUTPUT,
        help=f'directory for the data, result.json and input_pipeline.png '
        f'(default {DEFAULT_OUTPUT}); emptied first',
    )


def _log(message: str) -> None:
    print(f'[bench input {time.strftime("%H:%M:%S")}] {message}', flush=True)


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


def make_transformed_examples(
    output_dir: str,
    num_examples: int,
    sample_rows: int = DEFAULT_SAMPLE_ROWS,
    num_files: int = 8,
    seed: int = 0,
) -> TransformedExamples:
    """Transforms `sample_rows` taxi rows with the stock Transform executor and our
    `preprocessing_fn`, then writes `num_examples` rows resampled from its train split.

    Resampling is vectorized (Arrow `take`, tfx-bsl's C++ encoder), so a million examples take
    seconds rather than the minutes a Beam run over a million raw rows would.
    """
    import numpy as np
    import pyarrow as pa
    import tensorflow as tf
    from tfx_bsl.coders import example_coder

    from benchmarks import transform_runs as runs
    from components.transform import feature_config as fc

    started = time.monotonic()
    schema = fc.load_schema(str(runs.TAXI_SCHEMA))
    config = fc.load_feature_config(str(runs.TAXI_FEATURES), str(runs.TAXI_SCHEMA))
    raw_uri = runs.write_span(
        os.path.join(output_dir, 'raw'),
        1,
        runs.resample_span(runs.read_taxi_table(schema), 1, sample_rows, seed),
    )
    transform = runs.run_transform(
        [runs.examples_artifact(raw_uri, 1)],
        runs.schema_artifact(runs.TAXI_SCHEMA, os.path.join(output_dir, 'schema')),
        os.path.join(output_dir, 'transform'),
        config,
        disable_analyzer_cache=True,
        disable_statistics=True,
    )
    transformed = transform.transformed_examples[0]
    sample = example_coder.ExamplesToRecordBatchDecoder().DecodeBatch(
        runs.read_tfrecord_gzip(os.path.join(transformed, 'Split-train', '*'))
    )

    examples_dir = os.path.join(output_dir, 'examples')
    train_dir = os.path.join(examples_dir, 'Split-train')
    os.makedirs(train_dir)
    shutil.copytree(
        os.path.join(transformed, 'Split-eval'), os.path.join(examples_dir, 'Split-eval')
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
    size = sum(os.path.getsize(os.path.join(train_dir, f)) for f in os.listdir(train_dir))
    return TransformedExamples(
        examples_dir=examples_dir,
        transform_graph=transform.transform_graph,
        label_key=config.label.name,
        num_examples=num_examples,
        num_files=num_files,
        bytes=size,
        seconds=time.monotonic() - started,
    )


def make_task(
    data: TransformedExamples, hidden_units: tuple[int, ...] = (64, 32), trainer_config=None
):
    """Our task (model, optimizer, step, inputs) over `data`, with the Trainer's defaults."""
    from components.trainer import config as config_lib
    from components.trainer.training import task as task_lib
    from components.trainer.training import tasks

    schema = task_lib.load_transformed_schema(data.transform_graph, data.label_key)
    config = trainer_config or config_lib.TrainerConfig(
        model=config_lib.ModelConfig(hidden_units=tuple(hidden_units)),
        training=config_lib.TrainingConfig(
            batch_size=BATCH_SIZE, steps_per_execution=STEPS_PER_EXECUTION
        ),
    )
    return tasks.BinaryClassificationTask(schema, config)


def _rate(steps: int, seconds: float) -> float:
    return steps * BATCH_SIZE / seconds


def in_memory_batches(task, data: TransformedExamples, count: int = 1) -> list:
    """The first `count` parsed batches of our dataset, as tensors in memory."""
    from components.trainer.training import data as data_lib

    return list(
        task.build_inputs(data.examples_dir, data_lib.TRAIN_SPLIT, training=True).take(count)
    )


def in_memory_dataset(task, data: TransformedExamples):
    """`FIT_IN_MEMORY_BATCHES` in-memory batches as a repeated dataset, for `model.fit`."""
    import tensorflow as tf

    batches = in_memory_batches(task, data, FIT_IN_MEMORY_BATCHES)
    stacked = tf.nest.map_structure(lambda *x: tf.stack(x), *batches)
    return tf.data.Dataset.from_tensor_slices(stacked).repeat()


def cached_dataset(task, data: TransformedExamples):
    """Our dataset with `input.cache: memory`."""
    from components.trainer.training import data as data_lib
    from components.trainer.training import tasks

    config = task.config
    cached = dataclasses.replace(config, input=dataclasses.replace(config.input, cache='memory'))
    return tasks.BinaryClassificationTask(task.schema, cached).build_inputs(
        data.examples_dir, data_lib.TRAIN_SPLIT, training=True
    )


def train_in_loop(task, inputs, steps: int, warmup_steps: int = 0) -> dict:
    """Our step in a `tf.function` of `steps_per_execution` steps per call, fed by `inputs`: a
    dataset, or one in-memory batch (a list holding it) fed to every step, no iterator at all.

    The first call (tracing, filling buffers) is not timed. Then `warmup_steps` train steps are
    timed on their own (`warmup_examples_per_sec`) before the measured `steps`. The wait for
    input is timed inside the loop around `next(iterator)`, as the Trainer times it.
    """
    import tensorflow as tf

    keras_model = task.build_model()
    optimizer = task.build_optimizer()
    in_memory = not isinstance(inputs, tf.data.Dataset)
    iterator = None if in_memory else iter(inputs)

    def next_batch():
        if in_memory:
            return inputs[0]
        return next(iterator)

    @tf.function(input_signature=[tf.TensorSpec([], tf.int32)])
    def run_steps(num_steps):
        wait = tf.constant(0.0, tf.float64)
        for _ in tf.range(num_steps):
            # Explicit dependencies: automatic control dependencies order `tf.timestamp` only
            # against other ops without resource inputs, not against `next(iterator)`, so
            # without them both timestamps may run before the batch arrives.
            before = tf.timestamp()
            with tf.control_dependencies([before]):
                features, labels = next_batch()
            with tf.control_dependencies(tf.nest.flatten((features, labels))):
                wait += tf.timestamp() - before
            task.train_step(features, labels, keras_model, optimizer)
        return wait

    per_call = task.config.training.steps_per_execution

    def timed(total: int) -> tuple[float, float]:
        waited, done = 0.0, 0
        started = time.perf_counter()
        while done < total:
            n = min(per_call, total - done)
            waited += float(run_steps(tf.constant(n)))
            done += n
        return time.perf_counter() - started, waited

    run_steps(tf.constant(per_call)).numpy()
    result = {}
    if warmup_steps:
        warmup_seconds, _ = timed(warmup_steps)
        result = {
            'warmup_steps': warmup_steps,
            'warmup_examples_per_sec': _rate(warmup_steps, warmup_seconds),
        }
    seconds, waited = timed(steps)
    return {
        'examples_per_sec': _rate(steps, seconds),
        'seconds': seconds,
        'steps': steps,
        'input_stall_fraction': min(waited / seconds, 1.0),
        'stall_method': 'measured',
        **result,
    }


def train_with_fit(task, dataset, steps: int) -> dict:
    """`model.fit` as TFX's examples call it (Keras defaults: one step per call)."""
    import tensorflow as tf

    keras_model = task.build_model()
    keras_model.compile(
        optimizer=task.build_optimizer(), loss=tf.keras.losses.BinaryCrossentropy(from_logits=True)
    )
    warm = min(20, steps)
    keras_model.fit(dataset, steps_per_epoch=warm, epochs=1, verbose=0)
    started = time.perf_counter()
    keras_model.fit(dataset, steps_per_epoch=steps, epochs=1, verbose=0)
    seconds = time.perf_counter() - started
    return {'examples_per_sec': _rate(steps, seconds), 'seconds': seconds, 'steps': steps}


def tfx_dataset(task, data: TransformedExamples):
    """The dataset stock Trainer's `data_accessor.tf_dataset_factory` gives `run_fn`."""
    import tensorflow_transform as tft
    from tfx.components.util import tfxio_utils
    from tfx_bsl.public import tfxio

    from benchmarks import transform_runs as runs
    from components.trainer.training import data as data_lib

    factory = tfxio_utils.get_tf_dataset_factory_from_artifact(
        [runs.examples_artifact(data.examples_dir, 1)], []
    )
    schema = tft.TFTransformOutput(data.transform_graph).transformed_metadata.schema
    return factory(
        [data_lib.split_file_pattern(data.examples_dir, data_lib.TRAIN_SPLIT)],
        tfxio.TensorFlowDatasetOptions(batch_size=BATCH_SIZE, label_key=data.label_key),
        schema,
    )


def train_naive(task, data: TransformedExamples, steps: int) -> dict:
    """One record at a time, parsed one at a time, no prefetch, eager step."""
    import glob

    import tensorflow as tf

    from components.trainer.training import data as data_lib

    keras_model = task.build_model()
    optimizer = task.build_optimizer()
    spec = dict(task.schema.feature_spec)
    label_key = task.schema.label_key
    files = sorted(glob.glob(data_lib.split_file_pattern(data.examples_dir, data_lib.TRAIN_SPLIT)))
    records = iter(tf.data.TFRecordDataset(files, compression_type='GZIP').repeat())

    def next_batch():
        parsed = [tf.io.parse_single_example(next(records), spec) for _ in range(BATCH_SIZE)]
        features = {name: tf.stack([p[name] for p in parsed]) for name in spec}
        return features, features.pop(label_key)

    task.train_step(*next_batch(), keras_model, optimizer)
    waited = 0.0
    started = time.perf_counter()
    for _ in range(steps):
        before = time.perf_counter()
        features, labels = next_batch()
        waited += time.perf_counter() - before
        task.train_step(features, labels, keras_model, optimizer)
    seconds = time.perf_counter() - started
    return {
        'examples_per_sec': _rate(steps, seconds),
        'seconds': seconds,
        'steps': steps,
        'input_stall_fraction': waited / seconds,
        'stall_method': 'measured',
    }


def input_only_rate(dataset, steps: int) -> float:
    """Examples/s of a dataset alone: batches pulled in a `tf.function`, no model."""
    import tensorflow as tf

    iterator = iter(dataset)

    @tf.function(input_signature=[tf.TensorSpec([], tf.int32)])
    def pull(num_steps):
        for _ in tf.range(num_steps):
            next(iterator)
        return num_steps

    pull(tf.constant(STEPS_PER_EXECUTION))
    started = time.perf_counter()
    pull(tf.constant(steps))
    return _rate(steps, time.perf_counter() - started)


def naive_input_only_rate(task, data: TransformedExamples, steps: int) -> float:
    """Examples/s of the naive per-example parse alone."""
    import glob

    import tensorflow as tf

    from components.trainer.training import data as data_lib

    spec = dict(task.schema.feature_spec)
    files = sorted(glob.glob(data_lib.split_file_pattern(data.examples_dir, data_lib.TRAIN_SPLIT)))
    records = iter(tf.data.TFRecordDataset(files, compression_type='GZIP').repeat())
    started = time.perf_counter()
    for _ in range(steps):
        parsed = [tf.io.parse_single_example(next(records), spec) for _ in range(BATCH_SIZE)]
        {name: tf.stack([p[name] for p in parsed]) for name in spec}
    return _rate(steps, time.perf_counter() - started)


def model_parameters(task) -> int:
    return int(task.build_model().count_params())


def run_sweep(data: TransformedExamples, widths, steps: int, ours_input_rate: float) -> dict:
    """Upper bound and ours per hidden width; the crossover is where ours stops stalling."""
    from components.trainer.training import data as data_lib

    points = []
    for hidden_units in widths:
        task = make_task(data, hidden_units)
        upper = train_in_loop(task, in_memory_batches(task, data), steps)
        ours = train_in_loop(
            task, task.build_inputs(data.examples_dir, data_lib.TRAIN_SPLIT, training=True), steps
        )
        point = {
            'hidden_units': list(hidden_units),
            'parameters': model_parameters(task),
            'upper_bound_examples_per_sec': upper['examples_per_sec'],
            'ours_examples_per_sec': ours['examples_per_sec'],
            'ours_ratio_to_upper_bound': ours['examples_per_sec'] / upper['examples_per_sec'],
            'ours_input_stall_fraction': ours['input_stall_fraction'],
            # The model alone is slower than the input alone: compute-bound.
            'compute_bound': upper['examples_per_sec'] < ours_input_rate,
        }
        points.append(point)
        _log(
            f'sweep {hidden_units}: {point["parameters"]:,} parameters, upper '
            f'{upper["examples_per_sec"]:,.0f}/s, ours {ours["examples_per_sec"]:,.0f}/s '
            f'(ratio {point["ours_ratio_to_upper_bound"]:.2f}, stall '
            f'{ours["input_stall_fraction"]:.1%})'
        )
    first_not_input_bound = next(
        (
            p['hidden_units']
            for p in points
            if p['ours_input_stall_fraction'] < NOT_INPUT_BOUND_STALL
        ),
        None,
    )
    first_compute_bound = next((p['hidden_units'] for p in points if p['compute_bound']), None)
    return {
        'steps': steps,
        'points': points,
        'first_width_with_stall_under_5pct': first_not_input_bound,
        'first_width_slower_than_ours_input_alone': first_compute_bound,
    }


def write_chart(result: dict, path: str) -> None:
    import matplotlib

    matplotlib.use('Agg')
    from matplotlib import pyplot as plt

    variants = result['variants']
    names = [v for v in VARIANTS if v in variants]
    figure, (bars_axes, sweep_axes) = plt.subplots(1, 2, figsize=(12, 4.5))
    bars = bars_axes.bar(
        names,
        [variants[n]['examples_per_sec'] for n in names],
        color=['#9e9e9e', '#1f77b4', '#2ca02c', '#ff7f0e', '#d62728'][: len(names)],
    )
    bars_axes.bar_label(
        bars,
        labels=[
            f'{variants[n]["ratio_to_upper_bound"]:.2f}x\nstall {variants[n]["input_stall_fraction"]:.0%}'
            for n in names
        ],
    )
    bars_axes.set_ylabel('training examples/s')
    bars_axes.set_title(
        f'{result["steps"]} steps of batch {result["batch_size"]}, '
        f'{result["data"]["examples"]:,} examples'
    )
    bars_axes.margins(y=0.25)
    points = result['model_sweep']['points']
    params = [p['parameters'] for p in points]
    sweep_axes.plot(
        params,
        [p['upper_bound_examples_per_sec'] for p in points],
        'o-',
        color='#9e9e9e',
        label='upper bound (in memory)',
    )
    sweep_axes.plot(
        params, [p['ours_examples_per_sec'] for p in points], 'o-', color='#1f77b4', label='ours'
    )
    sweep_axes.axhline(
        result['input_only_examples_per_sec']['ours'],
        color='#1f77b4',
        linestyle=':',
        label='our input alone',
    )
    sweep_axes.set_xscale('log')
    sweep_axes.set_yscale('log')
    sweep_axes.set_xlabel('model parameters')
    sweep_axes.set_ylabel('examples/s')
    sweep_axes.set_title('small (input-bound) to large (compute-bound)')
    sweep_axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def run(args: argparse.Namespace) -> int:
    if args.examples < BATCH_SIZE or args.steps < 1 or args.sample_rows < 10:
        print(
            f'--examples: at least {BATCH_SIZE}; --steps: at least 1; --sample-rows: at least 10',
            file=sys.stderr,
        )
        return 2
    try:
        widths = [tuple(int(u) for u in w.split(',')) for w in args.sweep]
    except ValueError:
        print(
            f'--sweep: expected comma-separated integers per model, got {args.sweep}',
            file=sys.stderr,
        )
        return 2
    output = os.path.abspath(args.output)
    shutil.rmtree(output, ignore_errors=True)
    os.makedirs(output)
    _log(f'transforming {args.sample_rows:,} taxi rows, resampling to {args.examples:,} examples')
    from components.trainer.training import data as data_lib

    data = make_transformed_examples(os.path.join(output, 'data'), args.examples, args.sample_rows)
    _log(
        f'data: {data.num_examples:,} examples, {data.bytes / 2**20:.0f} MiB in '
        f'{data.num_files} GZIP files, {data.seconds:.1f} s'
    )
    task = make_task(data)
    steps = args.steps
    variants = {}
    _log('upper bound: in-memory tensors')
    variants['upper_bound'] = train_in_loop(task, in_memory_batches(task, data), steps)
    _log('ours: components.trainer.data')
    ours_dataset = task.build_inputs(data.examples_dir, data_lib.TRAIN_SPLIT, training=True)
    variants['ours'] = train_in_loop(task, ours_dataset, steps)
    _log('ours, input.cache: memory (one epoch to fill the cache, then timed)')
    epoch_steps = -(-data.num_examples // BATCH_SIZE)
    variants['ours_cached'] = train_in_loop(
        task, cached_dataset(task, data), steps, warmup_steps=epoch_steps
    )
    variants['ours_cached']['first_epoch_examples_per_sec'] = variants['ours_cached'].pop(
        'warmup_examples_per_sec'
    )
    variants['ours_cached']['first_epoch_steps'] = variants['ours_cached'].pop('warmup_steps')
    _log('tfx: tf_dataset_factory + model.fit')
    fit = train_with_fit(task, tfx_dataset(task, data), steps)
    fit_in_memory = train_with_fit(task, in_memory_dataset(task, data), steps)
    fit['input_stall_fraction'] = max(
        0.0, 1 - fit['examples_per_sec'] / fit_in_memory['examples_per_sec']
    )
    fit['stall_method'] = 'derived from model.fit on the in-memory batches'
    fit['fit_in_memory_examples_per_sec'] = fit_in_memory['examples_per_sec']
    variants['tfx'] = fit
    _log('naive: per-example parse, no prefetch, eager step')
    variants['naive'] = train_naive(task, data, args.naive_steps)
    upper = variants['upper_bound']['examples_per_sec']
    for name, measured in variants.items():
        measured['ratio_to_upper_bound'] = measured['examples_per_sec'] / upper
        _log(
            f'{name}: {measured["examples_per_sec"]:,.0f} examples/s, '
            f'{measured["ratio_to_upper_bound"]:.2f} of the upper bound, input stall '
            f'{measured["input_stall_fraction"]:.1%}'
        )

    _log('input pipelines alone (no model)')
    input_steps = max(1, steps // 2)
    input_only = {
        'ours': input_only_rate(
            task.build_inputs(data.examples_dir, data_lib.TRAIN_SPLIT, training=True), input_steps
        ),
        'tfx': input_only_rate(tfx_dataset(task, data), input_steps),
        'naive': naive_input_only_rate(task, data, args.naive_steps),
    }
    _log('input alone: ' + ', '.join(f'{k} {v:,.0f}/s' for k, v in input_only.items()))
    _log(f'model sweep over hidden widths {[list(w) for w in widths]}')
    sweep = run_sweep(data, widths, max(1, steps // 8), input_only['ours'])

    result = {
        'benchmark': 'input',
        'steps': steps,
        'batch_size': BATCH_SIZE,
        'steps_per_execution': STEPS_PER_EXECUTION,
        'model_hidden_units': list(task.config.model.hidden_units),
        'model_parameters': model_parameters(task),
        'data': {
            'examples': data.num_examples,
            'files': data.num_files,
            'bytes': data.bytes,
            'sample_rows_transformed': args.sample_rows,
            'generation_seconds': data.seconds,
        },
        'variants': variants,
        'ours_vs_tfx': variants['ours']['examples_per_sec'] / variants['tfx']['examples_per_sec'],
        'ours_cached_vs_tfx': (
            variants['ours_cached']['examples_per_sec'] / variants['tfx']['examples_per_sec']
        ),
        'input_only_examples_per_sec': input_only,
        'model_sweep': sweep,
        'machine': report.machine(),
        'finished_at': report.finished_at(),
    }
    result_path, chart_path = report.write_result(output, result, 'input_pipeline.png', write_chart)
    # The data is regenerated on every run; only the report stays.
    shutil.rmtree(os.path.join(output, 'data'), ignore_errors=True)

    print(f'\n{"pipeline":<14}{"examples/s":>12}{"vs upper":>10}{"input stall":>13}')
    for name in VARIANTS:
        measured = variants[name]
        print(
            f'{name:<14}{measured["examples_per_sec"]:>12,.0f}'
            f'{measured["ratio_to_upper_bound"]:>10.2f}{measured["input_stall_fraction"]:>13.1%}'
        )
    print(
        f'ours_cached after its first epoch '
        f'({variants["ours_cached"]["first_epoch_examples_per_sec"]:,.0f} examples/s): '
        f'{variants["ours_cached"]["ratio_to_upper_bound"]:.2f} of the upper bound'
    )
    print(
        f'ours / tfx = {result["ours_vs_tfx"]:.2f}; first width with our stall under 5%: '
        f'{sweep["first_width_with_stall_under_5pct"]}'
    )
    print(f'wrote {result_path} and {chart_path}')
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog='bench input', description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args())


if __name__ == '__main__':
    sys.exit(main())
