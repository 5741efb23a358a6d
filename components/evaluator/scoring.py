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
import tensorflow as tf
from apache_beam.transforms import window

from components.evaluator import metrics


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


def _single_input(function, where: str) -> str:
    """The name of a signature's one input (serialized examples)."""
    _, kwargs = function.structured_input_signature
    if len(kwargs) != 1:
        raise ValueError(f'{where}: expected one input (serialized examples), got {sorted(kwargs)}')
    return next(iter(kwargs))


def _call(function, input_name: str, examples: tf.Tensor, key: str, what: str, where: str):
    outputs = function(**{input_name: examples})
    if key not in outputs:
        raise ValueError(f'{where}: {what} {key!r} is not among its outputs {sorted(outputs)}')
    return outputs[key].numpy()


class _ScoreBatches(beam.DoFn):
    """Batches of serialized examples in; one {model name: metric state} per bundle out."""

    def __init__(self, models: Sequence[ModelToScore], specs: tuple[metrics.MetricSpec, ...]):
        self._models = tuple(models)
        self._specs = specs
        self._examples = beam.metrics.Metrics.counter('asynctrain_evaluator', 'examples_scored')

    def setup(self) -> None:
        self._loaded = []
        for model in self._models:
            saved_model = tf.saved_model.load(model.path)
            functions = []
            for signature in (model.preprocessing, model.signature):
                where = f'{model.path}: signature {signature!r}'
                if signature not in saved_model.signatures:
                    raise ValueError(
                        f'{model.path}: no signature {signature!r}; it has '
                        f'{sorted(saved_model.signatures)}'
                    )
                function = saved_model.signatures[signature]
                functions.append((function, _single_input(function, where), where))
            # Keeps the SavedModel alive: its signatures hold only weak references to it.
            self._loaded.append((model, saved_model, functions))

    def start_bundle(self) -> None:
        self._accumulators = {m.name: metrics.Accumulator(self._specs) for m in self._models}
        self._scored = 0

    def process(self, batch: Sequence[bytes]) -> Iterator[dict]:
        examples = tf.constant(list(batch), dtype=tf.string)
        for model, _, (
            (transform, transform_input, transform_where),
            (serve, serve_input, serve_where),
        ) in self._loaded:
            labels = _call(
                transform, transform_input, examples, model.label_key, 'label_key', transform_where
            )
            predictions = _call(
                serve, serve_input, examples, model.prediction_key, 'prediction_key', serve_where
            )
            self._accumulators[model.name].update(labels, predictions)
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
