"""The input pipelines that `asynctrain bench input` compares (see
`asynctrain.benchmarks.input_pipeline` for what is measured and how to read it), and the
ExampleBatcher's copy of their data.

The data (`transformed_examples`): transformed taxi examples as Transform writes them (one
`tf.Example` per record), resampled to any size. Here they are written once more by the
ExampleBatcher's writer (`columnar_records`: shuffled, many examples per record, column by
column), with its disk size, its write time and a check that it reads back as the same examples;
and each variant's runner trains our model on its pipeline, or pulls its batches with no model.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from asynctrain.benchmarks.transformed_examples import STEPS_PER_EXECUTION, TransformedExamples

# The variants, in the order the bench reports them.
VARIANTS = ('upper_bound', 'ours', 'ours_cached', 'per_example', 'tfx', 'naive')
# In-memory batches `model.fit` cycles through to derive the tfx variant's stall.
FIT_IN_MEMORY_BATCHES = 16


@dataclasses.dataclass(frozen=True)
class BatchedExamples:
    """The ExampleBatcher's artifact written from `TransformedExamples`.

    Attributes:
      examples_dir: `Split-train/` and `Split-eval/`, pre-batched.
      examples_per_record: Examples per record.
      records: Records in `Split-train/`.
      bytes: Size of `Split-train/`'s records on disk.
      write_seconds: Time to write both splits (read, shuffle, encode, compress).
    """

    examples_dir: str
    examples_per_record: int
    records: int
    bytes: int
    write_seconds: float


@dataclasses.dataclass(frozen=True)
class BenchData:
    """What every variant of the bench reads, made once.

    Attributes:
      data: The resampled transformed examples, as Transform writes them.
      batched: The ExampleBatcher's copy of `data`.
      task: Our task (model, optimizer, step, inputs) over `data`, at the bench's batch size.
      same_examples: Whether `batched` reads back as the same examples as `data`.
    """

    data: TransformedExamples
    batched: BatchedExamples
    task: Any
    same_examples: bool


def write_batched_examples(data: TransformedExamples, output_dir: str, task) -> BatchedExamples:
    """Both splits of `data` written as the pipeline's ExampleBatcher writes them."""
    from asynctrain.components.shared import columnar_records
    from asynctrain.components.trainer.training import data as data_lib

    started = time.monotonic()
    for split in (data_lib.TRAIN_SPLIT, data_lib.EVAL_SPLIT):
        metadata = columnar_records.write_split(
            data_lib.split_file_pattern(data.examples_dir, split),
            task.schema.feature_spec,
            columnar_records.split_dir(output_dir, split),
        )
        if split == data_lib.TRAIN_SPLIT:
            train = metadata
    return BatchedExamples(
        examples_dir=output_dir,
        examples_per_record=train['examples_per_record'],
        records=train['records'],
        bytes=train['bytes'],
        write_seconds=time.monotonic() - started,
    )


def same_examples(data: TransformedExamples, batched: BatchedExamples, task) -> bool:
    """Whether the batched train split reads back (through the Trainer's data module) as the
    same multiset of examples, every feature value equal, as the source split."""
    import numpy as np

    from asynctrain.components.shared import columnar_records
    from asynctrain.components.trainer.training import data as data_lib

    spec = task.schema.feature_spec
    source = columnar_records.read_columns(
        data_lib.split_file_pattern(data.examples_dir, data_lib.TRAIN_SPLIT), spec
    )
    read_back = {name: [] for name in spec}
    for features, labels in task.build_inputs(
        batched.examples_dir, data_lib.TRAIN_SPLIT, training=False
    ):
        for name, values in dict(features, **{task.schema.label_key: labels}).items():
            read_back[name].append(values.numpy())

    read_back = {name: np.concatenate(parts) for name, parts in read_back.items()}

    def sorted_rows(columns: dict) -> np.ndarray:
        # int64 ids and float32 values are exact in float64; rows sorted lexicographically.
        rows = np.column_stack(
            [columns[n].reshape(len(columns[n]), -1) for n in sorted(columns)]
        ).astype(np.float64)
        return rows[np.lexsort(rows.T[::-1])]

    source_rows, read_rows = sorted_rows(source), sorted_rows(read_back)
    return source_rows.shape == read_rows.shape and np.array_equal(source_rows, read_rows)


def _rate(steps: int, seconds: float, batch_size: int) -> float:
    return steps * batch_size / seconds


def in_memory_batches(task, data: TransformedExamples, count: int = 1) -> list:
    """The first `count` parsed batches of our dataset, as tensors in memory."""
    from asynctrain.components.trainer.training import data as data_lib

    return list(
        task.build_inputs(data.examples_dir, data_lib.TRAIN_SPLIT, training=True).take(count)
    )


def in_memory_dataset(task, data: TransformedExamples):
    """`FIT_IN_MEMORY_BATCHES` in-memory batches as a repeated dataset, for `model.fit`."""
    import tensorflow as tf

    batches = in_memory_batches(task, data, FIT_IN_MEMORY_BATCHES)
    stacked = tf.nest.map_structure(lambda *x: tf.stack(x), *batches)
    return tf.data.Dataset.from_tensor_slices(stacked).repeat()


def cached_dataset(task, examples_dir: str):
    """Our dataset over `examples_dir` with `input.cache: memory`."""
    from asynctrain.components.trainer.training import data as data_lib
    from asynctrain.components.trainer.training import tasks

    config = task.config
    cached = dataclasses.replace(config, input=dataclasses.replace(config.input, cache='memory'))
    return tasks.BinaryClassificationTask(task.schema, cached).build_inputs(
        examples_dir, data_lib.TRAIN_SPLIT, training=True
    )


def train_in_loop(
    task, inputs, steps: int, warmup_steps: int = 0, eval_examples_dir: str | None = None
) -> dict:
    """Our step in a `tf.function` of `steps_per_execution` steps per call, fed by `inputs`: a
    dataset, or one in-memory batch (a list holding it) fed to every step, no iterator at all.

    The first call (tracing, filling buffers) is not timed. Then `warmup_steps` train steps are
    timed on their own (`warmup_examples_per_sec`) before the measured `steps`. The wait for
    input is timed inside the loop around `next(iterator)`, as the Trainer times it. With
    `eval_examples_dir`, the trained model's AUC on its eval split is reported (`eval_auc`).
    """
    import tensorflow as tf

    keras_model = task.build_model()
    run_steps = _step_loop(task, inputs, keras_model, task.build_optimizer())
    per_call = task.config.training.steps_per_execution
    batch_size = task.config.training.batch_size
    run_steps(tf.constant(per_call)).numpy()
    result = {}
    if warmup_steps:
        warmup_seconds, _ = _timed_steps(run_steps, warmup_steps, per_call)
        result = {
            'warmup_steps': warmup_steps,
            'warmup_examples_per_sec': _rate(warmup_steps, warmup_seconds, batch_size),
        }
    seconds, waited = _timed_steps(run_steps, steps, per_call)
    if eval_examples_dir:
        from asynctrain.components.trainer.training import evaluation

        result['eval_auc'] = evaluation.evaluate(task, keras_model, eval_examples_dir)['auc']
    return {
        'examples_per_sec': _rate(steps, seconds, batch_size),
        'seconds': seconds,
        'steps': steps,
        'input_stall_fraction': min(waited / seconds, 1.0),
        'stall_method': 'measured',
        **result,
    }


def _step_loop(task, inputs, keras_model, optimizer):
    """A `tf.function(num_steps)` running our train step on `inputs`; it returns the input wait."""
    import tensorflow as tf

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

    return run_steps


def _timed_steps(run_steps, total: int, per_call: int) -> tuple[float, float]:
    """Runs `total` steps, `per_call` per call of `run_steps`: (wall seconds, seconds waited)."""
    import tensorflow as tf

    waited, done = 0.0, 0
    started = time.perf_counter()
    while done < total:
        n = min(per_call, total - done)
        waited += float(run_steps(tf.constant(n)))
        done += n
    return time.perf_counter() - started, waited


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
    return {
        'examples_per_sec': _rate(steps, seconds, task.config.training.batch_size),
        'seconds': seconds,
        'steps': steps,
    }


def tfx_dataset(task, data: TransformedExamples):
    """The dataset stock Trainer's `data_accessor.tf_dataset_factory` gives `run_fn`."""
    import tensorflow_transform as tft
    from tfx.components.util import tfxio_utils
    from tfx_bsl.public import tfxio

    from asynctrain.components.trainer.training import data as data_lib
    from asynctrain.testing import transform_runs as runs

    factory = tfxio_utils.get_tf_dataset_factory_from_artifact(
        [runs.examples_artifact(data.examples_dir, 1)], []
    )
    schema = tft.TFTransformOutput(data.transform_graph).transformed_metadata.schema
    return factory(
        [data_lib.split_file_pattern(data.examples_dir, data_lib.TRAIN_SPLIT)],
        tfxio.TensorFlowDatasetOptions(
            batch_size=task.config.training.batch_size, label_key=data.label_key
        ),
        schema,
    )


def train_naive(task, data: TransformedExamples, steps: int) -> dict:
    """One record at a time, parsed one at a time, no prefetch, eager step."""
    import glob

    import tensorflow as tf

    from asynctrain.components.trainer.training import data as data_lib

    keras_model = task.build_model()
    optimizer = task.build_optimizer()
    spec = dict(task.schema.feature_spec)
    label_key = task.schema.label_key
    batch_size = task.config.training.batch_size
    files = sorted(glob.glob(data_lib.split_file_pattern(data.examples_dir, data_lib.TRAIN_SPLIT)))
    records = iter(tf.data.TFRecordDataset(files, compression_type='GZIP').repeat())

    def next_batch():
        parsed = [tf.io.parse_single_example(next(records), spec) for _ in range(batch_size)]
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
        'examples_per_sec': _rate(steps, seconds, batch_size),
        'seconds': seconds,
        'steps': steps,
        'input_stall_fraction': waited / seconds,
        'stall_method': 'measured',
    }


def input_only_rate(dataset, steps: int, batch_size: int) -> float:
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
    return _rate(steps, time.perf_counter() - started, batch_size)


def naive_input_only_rate(task, data: TransformedExamples, steps: int) -> float:
    """Examples/s of the naive per-example parse alone."""
    import glob

    import tensorflow as tf

    from asynctrain.components.trainer.training import data as data_lib

    spec = dict(task.schema.feature_spec)
    batch_size = task.config.training.batch_size
    files = sorted(glob.glob(data_lib.split_file_pattern(data.examples_dir, data_lib.TRAIN_SPLIT)))
    records = iter(tf.data.TFRecordDataset(files, compression_type='GZIP').repeat())
    started = time.perf_counter()
    for _ in range(steps):
        parsed = [tf.io.parse_single_example(next(records), spec) for _ in range(batch_size)]
        {name: tf.stack([p[name] for p in parsed]) for name in spec}
    return _rate(steps, time.perf_counter() - started, batch_size)


def model_parameters(task) -> int:
    """The number of parameters of `task`'s model (a fresh build)."""
    return int(task.build_model().count_params())
