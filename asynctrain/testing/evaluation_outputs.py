"""An evaluation as TFMA wrote it (ours or stock TFMA's), and the comparison of ours with stock's.

Readers give each slice's metric values and intervals, its plots and the failed checks, keyed as
TFMA keys them; `differences` lists what two evaluations disagree on (slices, metric keys, values
within 1e-6, which metrics have intervals, plots, failed checks), which `bench evaluator` reports
and `assert_same` asserts empty; `run_stock` runs stock TFMA on the same examples and models,
its slice keys taken from the raw features as ours are.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping

import apache_beam as beam
import tensorflow_model_analysis as tfma
from google.protobuf import json_format
from tensorflow_model_analysis import constants as tfma_constants
from tensorflow_model_analysis.extractors import slice_key_extractor
from tensorflow_model_analysis.slicer import slicer_lib
from tensorflow_model_analysis.writers import metrics_plots_and_validations_writer as tfma_writer

# TFMA's note on a slice whose jackknife left some samples empty ("CI not computed because only
# N samples were non-empty"); such a slice has no intervals.
ERROR = tfma.metrics.MetricKey('__ERROR__')
# Below this many examples a slice may miss one of the 20 jackknife partitions (each example's
# partition is drawn at random, unseeded in TFMA): 20 * (19/20)**n < 0.1% from n = 150 on.
SMALL_SLICE = 150


def slice_key(record) -> tuple:
    if record.HasField('cross_slice_key'):
        return slicer_lib.deserialize_cross_slice_key(record.cross_slice_key)
    return slicer_lib.deserialize_slice_key(record.slice_key)


def values(output_dir: str) -> dict:
    """{slice key: {MetricKey: value}} of every slice and cross slice."""
    out = {}
    for slice_metrics in tfma_writer.load_and_deserialize_metrics(output_dir):
        key = slice_key(slice_metrics)
        if key in out:
            raise ValueError(f'{output_dir}: slice {key} written twice')
        out[key] = {
            tfma.metrics.MetricKey.from_proto(kv.key): kv.value.double_value.value
            for kv in slice_metrics.metric_keys_and_values
        }
    return out


def intervals(output_dir: str) -> dict:
    """{(slice key, MetricKey): (lower, value, upper, degrees of freedom, standard error)} of the
    values with a confidence interval."""
    out = {}
    for slice_metrics in tfma_writer.load_and_deserialize_metrics(output_dir):
        for kv in slice_metrics.metric_keys_and_values:
            if kv.HasField('confidence_interval'):
                interval = kv.confidence_interval
                out[(slice_key(slice_metrics), tfma.metrics.MetricKey.from_proto(kv.key))] = (
                    interval.lower_bound.double_value.value,
                    kv.value.double_value.value,
                    interval.upper_bound.double_value.value,
                    interval.degrees_of_freedom.value,
                    interval.standard_error.double_value.value,
                )
    return out


def plots(output_dir: str) -> dict:
    """{(slice key, PlotKey): the plot as a dict}."""
    return {
        (slice_key(record), tfma.metrics.PlotKey.from_proto(kv.key)): json_format.MessageToDict(
            kv.value
        )
        for record in tfma_writer.load_and_deserialize_plots(output_dir)
        for kv in record.plot_keys_and_values
    }


def failures(output_dir: str) -> tuple[bool, set, list]:
    """(validation_ok, {(slice key, MetricKey, threshold)}, missing slice specs)."""
    result = tfma.load_validation_result(output_dir)
    keys = {
        (
            slice_key(per_slice),
            tfma.metrics.MetricKey.from_proto(failure.metric_key),
            failure.metric_threshold.SerializeToString(),
        )
        for per_slice in result.metric_validations_per_slice
        for failure in per_slice.failures
    }
    return result.validation_ok, keys, list(result.missing_slices)


def randomly_noted_slices(stock: dict, ours: dict) -> set:
    """The slices where either side has TFMA's empty-partition note: both draw jackknife
    partitions at random, so on a small slice the note may come out on one side only. ValueError
    for a noted slice too large for that to happen by chance."""
    noted = {k for side in (stock, ours) for k, v in side.items() if ERROR in v}
    count = tfma.metrics.MetricKey('example_count')
    for key in noted:
        if stock.get(key, ours.get(key, {})).get(count, 0) >= SMALL_SLICE:
            raise ValueError(f'slice {key}: no interval for a slice of {SMALL_SLICE}+ examples')
    return noted


def small_slices(output_dir: str) -> set:
    """The slices written with TFMA's note alone: fewer examples than `min_slice_size`."""
    return {
        slice_key(record)
        for record in tfma_writer.load_and_deserialize_metrics(output_dir)
        if ERROR.name in record.metrics
    }


def _undefined(ours_value, stock_value, sliced, key) -> bool:
    """Whether ours reports undefined (NaN) what TFMA gives a number for, as ours departs from it
    on purpose: the AUC of a one-class slice, 0 in TFMA, and what derives from it (a cross slice,
    a diff against the baseline), whatever TFMA's number there."""
    if not (isinstance(ours_value, float) and math.isnan(ours_value)):
        return False
    return stock_value == 0.0 or key.is_diff or slicer_lib.is_cross_slice_key(sliced)


def comparable_failures(stock_dir: str, ours_dir: str) -> tuple[tuple, tuple]:
    """(stock's, ours') `failures`, less stock's failures that ours does not apply on purpose:
    on a slice (not the overall one) where ours' metric is undefined, or that is too small
    (`small_slices`; TFMA fails each threshold there as "Metric not found")."""
    ours_values, small = values(ours_dir), small_slices(ours_dir)
    _, stock_failed, stock_missing = failures(stock_dir)
    kept = set()
    for sliced, key, threshold in stock_failed:
        value = ours_values.get(sliced, {}).get(key)
        unapplied = sliced in small or (isinstance(value, float) and math.isnan(value))
        if sliced == () or not unapplied:
            kept.add((sliced, key, threshold))
    stock = (not kept and not stock_missing, kept, stock_missing)
    return stock, failures(ours_dir)


def _close(a, b, rel: float) -> bool:
    if isinstance(b, float) and isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= max(rel * abs(b), 1e-9)
    return a == b


def _plot_differences(ours, stock, where: str, rel: float, out: list[str]) -> None:
    if isinstance(stock, dict) and isinstance(ours, dict):
        if sorted(ours) != sorted(stock):
            out.append(f'{where}: fields {sorted(ours)} against {sorted(stock)}')
            return
        for key in stock:
            _plot_differences(ours[key], stock[key], f'{where}.{key}', rel, out)
    elif isinstance(stock, list) and isinstance(ours, list):
        if len(ours) != len(stock):
            out.append(f'{where}: {len(ours)} entries against {len(stock)}')
            return
        for i, (a, b) in enumerate(zip(ours, stock)):
            _plot_differences(a, b, f'{where}[{i}]', rel, out)
    elif not _close(ours, stock, rel):
        out.append(f'{where}: {ours!r} against {stock!r}')


def differences(stock_dir: str, ours_dir: str, rel: float = 1e-6, not_compared=()) -> list[str]:
    """Every disagreement of the evaluation in `ours_dir` with `stock_dir`: slices, metric keys,
    values (relative `rel`; not those of the metrics named in `not_compared`), which metrics have
    an interval, plots and failed checks. Interval bounds are not compared: both draw their
    jackknife partitions at random (and ours are clipped to the metric's range). Ours departs
    from TFMA on purpose where a metric is undefined (`_undefined`, `comparable_failures`); stock
    slices the raw features when `run_stock` ran it."""
    stock, ours = values(stock_dir), values(ours_dir)
    out = []
    if sorted(ours, key=str) != sorted(stock, key=str):
        return [f'slices: {sorted(ours, key=str)} against {sorted(stock, key=str)}']
    noted = randomly_noted_slices(stock, ours)
    for sliced, stock_values in stock.items():
        keys = sorted((k for k in stock_values if k != ERROR), key=str)
        if sorted((k for k in ours[sliced] if k != ERROR), key=str) != keys:
            out.append(f'slice {sliced}: metrics {sorted(ours[sliced], key=str)} against {keys}')
            continue
        for key in keys:
            ours_value = ours[sliced][key]
            if key.name in not_compared or _undefined(ours_value, stock_values[key], sliced, key):
                continue
            if not _close(ours_value, stock_values[key], rel):
                out.append(
                    f'slice {sliced}: {key}: {ours[sliced][key]} against {stock_values[key]}'
                )
    stock_failures, ours_failures = comparable_failures(stock_dir, ours_dir)
    if ours_failures != stock_failures:
        out.append(f'failed checks: {ours_failures} against {stock_failures}')
    ours_intervals, stock_intervals = (
        sorted((k for k in intervals(d) if k[0] not in noted), key=str)
        for d in (ours_dir, stock_dir)
    )
    if ours_intervals != stock_intervals:
        out.append(f'intervals on {ours_intervals} against {stock_intervals}')
    stock_plots, ours_plots = plots(stock_dir), plots(ours_dir)
    if sorted(ours_plots, key=str) != sorted(stock_plots, key=str):
        out.append(f'plots: {sorted(ours_plots, key=str)} against {sorted(stock_plots, key=str)}')
    else:
        for key, plot in stock_plots.items():
            _plot_differences(ours_plots[key], plot, str(key), rel, out)
    return out


def assert_same(stock_dir: str, ours_dir: str, not_compared: Collection[str] = ()) -> dict:
    """Raises AssertionError naming every disagreement (`differences`) of the evaluation in
    `ours_dir` with `stock_dir`; returns ours' {slice key: {MetricKey: value}}."""
    found = differences(stock_dir, ours_dir, not_compared=not_compared)
    if found:
        raise AssertionError(f'{ours_dir} differs from {stock_dir}:\n' + '\n'.join(found))
    return values(ours_dir)


TRANSFORMED_FEATURES = tfma_constants.TRANSFORMED_FEATURES_KEY


class _RawSliceKeysFn(slice_key_extractor.ExtractSliceKeysFn):
    """TFMA's slice keys of an example from its raw features alone: TFMA's own DoFn, shown the
    extracts without the transformed features (which its `SliceAccessor` would look in first)."""

    def process(self, element, slice_spec):
        raw_only = {k: v for k, v in element.items() if k != TRANSFORMED_FEATURES}
        (sliced,) = super().process(raw_only, slice_spec)
        if TRANSFORMED_FEATURES in element:
            sliced[TRANSFORMED_FEATURES] = element[TRANSFORMED_FEATURES]
        return [sliced]


def raw_slice_key_extractor(eval_config: tfma.EvalConfig) -> tfma.extractors.Extractor:
    """TFMA's `SliceKeyExtractor` (its specs, in its order) over the raw features, as our
    Evaluator slices (`asynctrain.components.evaluator.slicing`)."""
    specs = [slicer_lib.SingleSliceSpec(spec=s) for s in eval_config.slicing_specs]
    for cross in eval_config.cross_slicing_specs:
        for spec in (cross.baseline_spec, *cross.slicing_specs):
            if slicer_lib.SingleSliceSpec(spec=spec) not in specs:
                specs.append(slicer_lib.SingleSliceSpec(spec=spec))
    return tfma.extractors.Extractor(
        stage_name=slice_key_extractor.SLICE_KEY_EXTRACTOR_STAGE_NAME,
        ptransform=beam.ParDo(
            _RawSliceKeysFn(eval_config, materialize=False),
            slice_spec=specs or [slicer_lib.SingleSliceSpec()],
        ),
    )


def run_stock(
    eval_config: tfma.EvalConfig,
    model_paths: Mapping[str, str],
    data_location: str,
    output_path: str,
    seed: int | None = None,
) -> None:
    """Stock TFMA (`tfma.run_model_analysis`, the engine inside TFX's Evaluator) on the same
    examples and models: `model_paths` maps each model spec's name ('' for a single model) to its
    SavedModel directory; `seed` fixes TFMA's bootstrap draws (its `random_seed_for_testing`).
    Its extractors are TFMA's defaults but for the slice keys, taken from the raw features
    (`raw_slice_key_extractor`), as ours are."""
    shared = [
        tfma.default_eval_shared_model(path, eval_config=eval_config, model_name=name)
        for name, path in model_paths.items()
    ]
    eval_shared_model = shared[0] if len(shared) == 1 else shared
    extractors = [
        raw_slice_key_extractor(eval_config)
        if e.stage_name == slice_key_extractor.SLICE_KEY_EXTRACTOR_STAGE_NAME
        else e
        for e in tfma.default_extractors(
            eval_shared_model=eval_shared_model, eval_config=eval_config
        )
    ]
    tfma.run_model_analysis(
        eval_shared_model=eval_shared_model,
        eval_config=eval_config,
        data_location=data_location,
        output_path=output_path,
        extractors=extractors,
        random_seed_for_testing=seed,
    )
