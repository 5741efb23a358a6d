"""The Evaluator's Beam pipeline: read the eval split, batch it, score every batch with every
model, and merge the metric states into one per (slice key, model).

Each model is a serving SavedModel as the Trainer exports it: its preprocessing signature
(`transform_features`) gives the label, its serving signature the prediction, both called on the
same batch of serialized raw examples, as TFMA calls them. Batches are large (thousands of
examples per signature call) and a worker keeps one state per slice key and model for its whole
bundle, so what crosses stages is a few states, not per-example predictions. The rows of each
slice come from `slicing` (TFMA's slice keys, over the raw features).

Confidence intervals resample each (slice, example) as TFMA does, without scoring anything twice:
the jackknife puts it in one of 20 random partitions (a state per partition), the Poisson bootstrap
adds it to each of 20 samples as many times as a Poisson(1) draw says (a state per sample, plus
the unsampled one); `resampling` draws both.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Iterator, Sequence

import apache_beam as beam
import numpy as np
import tensorflow as tf
from apache_beam.transforms import window

from asynctrain.components.evaluator import metrics, resampling, slicing


@dataclasses.dataclass(frozen=True)
class ModelToScore:
    """One model of the evaluation, as its `config_pb2.ModelSpec` names it.

    Attributes:
      name: The model's name in the evaluation ('' alone; 'candidate' and 'baseline' together).
      path: The serving SavedModel's directory.
      signature: The signature that predicts (`serving_default`).
      preprocessing: The signature that returns the transformed features, label included.
      label_key: The label's key among the transformed features.
      prediction_key: The prediction's key among the signature's outputs.
      example_weight_key: The feature that weighs each example: a transformed feature, else a
        raw one (as TFMA looks it up); '' weighs every example 1.
    """

    name: str
    path: str
    signature: str
    preprocessing: str
    label_key: str
    prediction_key: str
    example_weight_key: str = ''


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

    def outputs(self, examples: tf.Tensor) -> dict:
        """Every output of the signature for `examples`."""
        return self.function(**{self.input_name: examples})

    def pick(self, outputs: dict, key: str, field: str) -> np.ndarray:
        """The output `key` (named by the model spec's `field`) of `outputs`."""
        if key not in outputs:
            raise ValueError(
                f'{self.where}: {field} {key!r} is not among its outputs {sorted(outputs)}'
            )
        return outputs[key].numpy()


class _ScoreBatches(beam.DoFn):
    """Batches of serialized examples in; one {slice key: {model name: metric state}} per bundle
    out."""

    def __init__(
        self,
        models: Sequence[ModelToScore],
        specs: tuple[metrics.MetricSpec, ...],
        slice_specs: Sequence,
        num_partitions: int = 0,
        seed: int | None = None,
        num_bootstrap_samples: int = 0,
    ):
        self._models = tuple(models)
        self._num_partitions = num_partitions
        self._num_bootstrap_samples = num_bootstrap_samples
        self._seed = seed
        self._specs = specs
        self._slice_specs = list(slice_specs)
        self._slice_features = slicing.feature_names(self._slice_specs)
        weight_keys = {m.example_weight_key for m in self._models} - {''}
        self._raw_names = tuple(sorted(set(self._slice_features) | weight_keys))
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
        self._raw_features = slicing.RawFeatureParser(self._raw_names)
        # TFMA's jackknife puts each (slice, example) in a random partition, unseeded.
        self._random = np.random.default_rng(self._seed)

    def start_bundle(self) -> None:
        # {(slice key, partition): {model name: Accumulator}}, made as a bundle meets each; the
        # partition is 0 without confidence intervals.
        self._accumulators: dict[tuple, dict[str, metrics.Accumulator]] = {}
        self._scored = 0

    def process(self, batch: Sequence[bytes]) -> Iterator[dict]:
        examples = tf.constant(list(batch), dtype=tf.string)
        size = len(batch)
        scored, transformed = [], []
        for model, (transform, serve) in zip(self._models, self._signatures):
            features = transform.outputs(examples)
            transformed.append(features)
            labels = transform.pick(features, model.label_key, 'label_key')
            predictions = serve.pick(
                serve.outputs(examples), model.prediction_key, 'prediction_key'
            )
            scored.append([model, labels, predictions, None])
        # Slices read the raw features always; a weight only when no model outputs it.
        unresolved = [n for n in self._raw_names if not any(n in t for t in transformed)]
        raw = self._raw_features.parse(batch) if self._slice_features or unresolved else {}
        for item, features in zip(scored, transformed):
            if item[0].example_weight_key:
                item[3] = _weights(item[0], features, raw, size)
        # Without slice features every spec is the overall slice: all rows, no indexing.
        rows_by_slice = {(): None}
        if self._slice_features:
            columns = slicing.columns_for_slicing(self._slice_features, raw)
            rows_by_slice = slicing.rows_by_slice(self._slice_specs, columns, size)
        keys = resampling.example_keys(batch, self._seed) if self._num_bootstrap_samples else None
        for slice_key, rows in rows_by_slice.items():
            for sample, part, times in self._resample(
                size if rows is None else rows, slice_key, keys
            ):
                self._update((slice_key, sample), part, size, scored, times)
        self._scored += size
        self._examples.inc(len(batch))
        return iter(())

    def _resample(self, rows, slice_key: tuple, keys: np.ndarray | None) -> list[tuple]:
        """[(state key, rows, multiplicities)] of a slice's `rows` (`resampling`)."""
        if self._num_bootstrap_samples:
            return resampling.bootstrap(rows, keys, slice_key, self._num_bootstrap_samples)
        if self._num_partitions:
            return resampling.jackknife(rows, self._random, self._num_partitions)
        return resampling.unsampled(rows)

    def _update(
        self, key: tuple, rows, size: int, scored: list, times: np.ndarray | None = None
    ) -> None:
        accumulators = self._accumulators.setdefault(key, {})
        whole = rows is None or (rows.size == size and times is None)
        for model, labels, predictions, weights in scored:
            if model.name not in accumulators:
                accumulators[model.name] = metrics.Accumulator(self._specs)
            # A bootstrap sample that drew none of the slice's rows still has its (empty) state,
            # as TFMA's sample of a slice exists whatever it drew.
            if rows is not None and not rows.size:
                continue
            if not whole:
                labels, predictions = labels[rows], predictions[rows]
                weights = None if weights is None else weights[rows]
            accumulators[model.name].update(labels, predictions, weights, times)

    def finish_bundle(self) -> Iterable[beam.utils.windowed_value.WindowedValue]:
        if self._scored:
            yield window.GlobalWindows.windowed_value(
                {
                    slice_key: {name: a.state() for name, a in accumulators.items()}
                    for slice_key, accumulators in self._accumulators.items()
                }
            )


def _weights(model: ModelToScore, transformed: dict, raw: dict, size: int) -> np.ndarray:
    """One weight per example: the model's transformed feature, else the raw one (TFMA's
    `get_feature_values_for_model_spec_field`); ValueError naming the key unless each example
    has exactly one."""
    key = model.example_weight_key
    if key in transformed:
        rows, values = slicing.transformed_column(transformed[key], size)
    elif key in raw:
        rows, values = raw[key]
    else:
        rows, values = np.zeros(0, np.int64), np.zeros(0)
    if rows.size != size or np.any(np.bincount(rows, minlength=size) != 1):
        raise ValueError(
            f'example_weight_key {key!r} of model {model.name or "(candidate)"}: expected one '
            f'value per example, got {rows.size} values for {size} examples'
        )
    weights = np.zeros(size)
    weights[rows] = values
    return weights


class _MergeStates(beam.CombineFn):
    """Adds the per-bundle states into one {slice key: {model name: metric state}}."""

    def create_accumulator(self) -> dict:
        return {}

    def add_input(self, accumulator: dict, state: dict) -> dict:
        return metrics.merge_sliced_states(accumulator, state)

    def merge_accumulators(self, accumulators: Iterable[dict]) -> dict:
        return functools.reduce(metrics.merge_sliced_states, accumulators, {})

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
    slice_specs: Sequence,
    num_partitions: int = 0,
    seed: int | None = None,
    num_bootstrap_samples: int = 0,
) -> beam.PCollection:
    """The merged {(slice key, partition): {model name: metric state}} of every model over the
    examples in `file_patterns` (TFRecords of serialized `tf.Example`s, GZIP by their `.gz`
    suffix), for the slices of `slice_specs` (`slicing.slice_specs`), each (slice, example) in a
    random one of `num_partitions` for the jackknife (partition 0 when 0), or under
    `num_bootstrap_samples` Poisson bootstrap samples (`resampling`, seeded by `seed`, else
    `resampling.BOOTSTRAP_SEED`); one element, `{}` when there are none."""
    reads = [
        pipeline | f'ReadExamples[{index}]' >> beam.io.ReadFromTFRecord(pattern)
        for index, pattern in enumerate(file_patterns)
    ]
    return (
        reads
        | 'FlattenExamples' >> beam.Flatten()
        | 'Batch' >> beam.BatchElements(min_batch_size=batch_size, max_batch_size=batch_size)
        | 'Score'
        >> beam.ParDo(
            _ScoreBatches(models, specs, slice_specs, num_partitions, seed, num_bootstrap_samples)
        )
        | 'MergeStates' >> beam.CombineGlobally(_MergeStates())
    )
