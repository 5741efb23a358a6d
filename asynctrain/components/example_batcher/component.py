"""The ExampleBatcher component: examples, transformed and rewritten once as training-ready records.

A Beam component (as TFX's Transform): the pipeline's `beam_pipeline_args` reach it. The work
happens in `batching.WriteBatchedSplit` (or, on a direct runner below a measured size, the same
layout written in one process); this module holds the constructor, its validation and defaults.
"""

from __future__ import annotations

from tfx.dsl.components.base import base_beam_component, executor_spec
from tfx.types import channel, standard_artifacts

from asynctrain.components.example_batcher import executor
from asynctrain.components.example_batcher.spec import ExampleBatcherSpec
from asynctrain.components.shared import columnar_records


class ExampleBatcher(base_beam_component.BaseBeamComponent):
    """Shuffles each split of the examples and writes it transformed and pre-batched.

    With `transform=True` the examples are raw (ExampleGen's) and the batcher applies the
    transform graph itself, in large vectorized batches, with the function the serving model
    embeds (`transform_features_layer()`); Transform then only analyzes (`materialize=False`), and
    no split is transformed, encoded and written one example at a time in between. Otherwise
    the examples are Transform's `transformed_examples`.

    Each output record is one `tf.Example` whose every feature holds the values of
    `examples_per_record` examples (column by column), so the Trainer parses about one record
    per step instead of one per example; it still draws every batch across several records
    (`columnar_records.make_batched_dataset`). Written once per Transform output, the artifact
    serves every worker, every epoch and every rerun; TFX caches it like any component's output.

    The shuffle is a layout defined by content (`shared.shuffled_shards`): a seeded hash of each
    raw example picks its file and its place there, so the same examples and seed write the
    same bytes whether a distributed Beam runner writes them (`batching.WriteBatchedSplit`, the
    runner's GroupByKey as the shuffle) or, on a direct runner, this component's own process.

    Usage:

    ```python
    transform = Transform(examples=example_gen.outputs['examples'], materialize=False, ...)
    batcher = ExampleBatcher(
        examples=example_gen.outputs['examples'],
        transform_graph=transform.outputs['transform_graph'],
        transform=True)
    trainer = Trainer(examples=batcher.outputs['batched_examples'], ...)
    ```

    Component `outputs` contains:
     - `batched_examples`: Channel of type `standard_artifacts.Examples`, with the input's splits
       (`Split-<name>/batches-*.gz` and `Split-<name>/batched_examples.json`) and the custom
       properties `examples_format` (`columnar_tf_example`), `examples_per_record` and
       `examples_<split>` (examples written). Only readers that know the format (the Trainer's
       data module) read it; the Evaluator keeps reading Transform's or ExampleGen's examples.
    """

    SPEC_CLASS = ExampleBatcherSpec
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(executor.Executor)

    def __init__(
        self,
        examples: channel.BaseChannel,
        transform_graph: channel.BaseChannel,
        examples_per_record: int = columnar_records.DEFAULT_EXAMPLES_PER_RECORD,
        num_files: int = columnar_records.DEFAULT_NUM_FILES,
        seed: int = 0,
        transform: bool = False,
    ):
        """Constructs an ExampleBatcher.

        Args:
          examples: Raw examples (ExampleGen's) with `transform=True`, else Transform's
            `transformed_examples`.
          transform_graph: Transform's `transform_graph`: the transformed feature spec, and with
            `transform=True` the function applied to the raw examples.
          examples_per_record: Examples per output record (the last record of each file may hold
            fewer). About one training batch: fewer parses more records per step, more makes
            windows of the reader's shuffle coarser.
          num_files: Files (shards) per split; 0: one per 4 MB of source GZIP TFRecords, at
            least 8. An example goes to the file its seeded hash picks; a file is what one
            worker (or the one process) holds in memory while writing it.
          seed: Seed of the shuffle; the same inputs and seed write the same bytes, on any
            runner and any number of workers.
          transform: Whether `examples` are raw and transformed here.
        """
        if not isinstance(examples_per_record, int) or examples_per_record < 1:
            raise ValueError(
                f'examples_per_record: expected an integer >= 1, got {examples_per_record!r}'
            )
        if not isinstance(num_files, int) or num_files < 0:
            raise ValueError(f'num_files: expected an integer >= 0 (0: by size), got {num_files!r}')
        if not isinstance(seed, int) or seed < 0:
            raise ValueError(f'seed: expected an integer >= 0, got {seed!r}')
        super().__init__(
            spec=ExampleBatcherSpec(
                examples=examples,
                transform_graph=transform_graph,
                examples_per_record=examples_per_record,
                num_files=num_files,
                seed=seed,
                transform=int(bool(transform)),
                batched_examples=channel.Channel(type=standard_artifacts.Examples),
            )
        )
