"""The Evaluator's Beam pipeline: read the eval split, batch it, score every batch with every
model, and merge the metric states into one per model.

Each model is a serving SavedModel as the Trainer exports it: its preprocessing signature
(`transform_features`) gives the label, its serving signature the prediction, both called on the
same batch of serialized raw examples, as TFMA calls them. Batches are large (thousands of
examples per signature call) and a worker keeps one state per model for its whole bundle, so what
crosses stages is a few states, not per-example predictions.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Iterator, Sequence

import apache_beam as beam
import numpy as np
import tensorflow as tf
from apache_beam.transforms import window

from asynctrain.components.evaluator import metrics


@dataclasses.dataclass(frozen=True)
class ModelToScore:
    """One model of the evaluation, as its `tfma.ModelSpec` names it.

    Attributes:
      name: The model's name in the evaluation ('' alone; 'candidate' and 'baseline' together).
      path: The serving SavedModel's directory.
      signature: The signature that predicts (`serving_default`).
      preprocessing: The signature that returns the transformed features, label included.
      label_key: The label's key among the transformed features.
      prediction_key: The prediction's key among the signature's outputs.
    """

    name: str
    path: str
    signature: str
    preprocessing: str
    label_key: str
    prediction_key: str


@dataclasses.dataclass(frozen=True)
class _Signature:
    """One signature of a loaded SavedModel, called with a batch of serialized examples."""

    function: object
    input_name: str
    where: str

    @classmethod
    def load(cls, saved_model, path: str, name: str) -> _Signature:
        if name not in saved_model.signatures:
            raise ValueError(
                f'{path}: no signature {name!r}; it has {sorted(saved_model.signatures)}'
            )
        function = saved_model.signatures[name]
        where = f'{path}: signature {name!r}'
        _, kwargs = function.structured_input_signature
        if len(kwargs) != 1:
            raise ValueError(
                f'{where}: expected one input (serialized examples), got {sorted(kwargs)}'
            )
        return cls(function, next(iter(kwargs)), where)

    def output(self, examples: tf.Tensor, key: str, field: str) -> np.ndarray:
        """The output `key` (named by the model spec's `field`) for `examples`."""
        outputs = self.function(**{self.input_name: examples})
        if key not in outputs:
            raise ValueError(
                f'{self.where}: {field} {key!r} is not among its outputs {sorted(outputs)}'
            )
        return outputs[key].numpy()


class _ScoreBatches(beam.DoFn):
    """Batches of serialized examples in; one {model name: metric state} per bundle out."""

    def __init__(self, models: Sequence[ModelToScore], specs: tuple[metrics.MetricSpec, ...]):
        self._models = tuple(models)
        self._specs = specs
        self._examples = beam.metrics.Metrics.counter('asynctrain_evaluator', 'examples_scored')

    def setup(self) -> None:
        # The SavedModels stay referenced here: their signatures hold only weak references.
        self._saved_models = [tf.saved_model.load(m.path) for m in self._models]
        self._signatures = [
            (
                _Signature.load(saved_model, model.path, model.preprocessing),
                _Signature.load(saved_model, model.path, model.signature),
            )
            for model, saved_model in zip(self._models, self._saved_models)
        ]

    def start_bundle(self) -> None:
        self._accumulators = {m.name: metrics.Accumulator(self._specs) for m in self._models}
        self._scored = 0

    def process(self, batch: Sequence[bytes]) -> Iterator[dict]:
        examples = tf.constant(list(batch), dtype=tf.string)
        for model, (transform, serve) in zip(self._models, self._signatures):
            self._accumulators[model.name].update(
                transform.output(examples, model.label_key, 'label_key'),
                serve.output(examples, model.prediction_key, 'prediction_key'),
            )
        self._scored += len(batch)
        self._examples.inc(len(batch))
        return iter(())

    def finish_bundle(self) -> Iterable[beam.utils.windowed_value.WindowedValue]:
        if self._scored:
            yield window.GlobalWindows.windowed_value(
                {name: accumulator.state() for name, accumulator in self._accumulators.items()}
            )


class _MergeStates(beam.CombineFn):
    """Adds the per-bundle states into one {model name: metric state}."""

    def create_accumulator(self) -> dict:
        return {}

    def add_input(self, accumulator: dict, state: dict) -> dict:
        return metrics.merge_states(accumulator, state)

    def merge_accumulators(self, accumulators: Iterable[dict]) -> dict:
        return functools.reduce(metrics.merge_states, accumulators, {})

    def extract_output(self, accumulator: dict) -> dict:
        return accumulator


@beam.ptransform_fn
@beam.typehints.with_output_types(dict)
def ScoreExamples(  # pylint: disable=invalid-name
    pipeline: beam.Pipeline,
    file_patterns: Sequence[str],
    models: Sequence[ModelToScore],
    specs: tuple[metrics.MetricSpec, ...],
    batch_size: int,
) -> beam.PCollection:
    """The merged {model name: metric state} of every model over the examples in `file_patterns`
    (TFRecords of serialized `tf.Example`s, GZIP by their `.gz` suffix); one element, `{}` when
    there are none."""
    reads = [
        pipeline | f'ReadExamples[{index}]' >> beam.io.ReadFromTFRecord(pattern)
        for index, pattern in enumerate(file_patterns)
    ]
    return (
        reads
        | 'FlattenExamples' >> beam.Flatten()
        | 'Batch' >> beam.BatchElements(min_batch_size=batch_size, max_batch_size=batch_size)
        | 'Score' >> beam.ParDo(_ScoreBatches(models, specs))
        | 'MergeStates' >> beam.CombineGlobally(_MergeStates())
    )
