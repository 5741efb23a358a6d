"""Reading TFMA's output files (metrics, plots, validations) and comparing two of them: ours
against stock TFMA's, slice by slice, metric by metric, within 1e-6."""

import pytest
import tensorflow_model_analysis as tfma
from google.protobuf import json_format
from tensorflow_model_analysis.slicer import slicer_lib
from tensorflow_model_analysis.writers import metrics_plots_and_validations_writer as tfma_writer


def slice_key(record):
    if record.HasField('cross_slice_key'):
        return slicer_lib.deserialize_cross_slice_key(record.cross_slice_key)
    return slicer_lib.deserialize_slice_key(record.slice_key)


def values(output_dir):
    """{slice key: {MetricKey: value}} of every slice and cross slice."""
    out = {}
    for slice_metrics in tfma_writer.load_and_deserialize_metrics(output_dir):
        key = slice_key(slice_metrics)
        assert key not in out
        out[key] = {
            tfma.metrics.MetricKey.from_proto(kv.key): kv.value.double_value.value
            for kv in slice_metrics.metric_keys_and_values
        }
    return out


def intervals(output_dir):
    """{(slice key, MetricKey): (lower, value, upper, degrees of freedom)} of the values with a
    confidence interval."""
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
                )
    return out


def plots(output_dir):
    """{(slice key, PlotKey): the plot as a dict}."""
    return {
        (slice_key(record), tfma.metrics.PlotKey.from_proto(kv.key)): json_format.MessageToDict(
            kv.value
        )
        for record in tfma_writer.load_and_deserialize_plots(output_dir)
        for kv in record.plot_keys_and_values
    }


def assert_close(ours, stock, where):
    """The same structure, numbers within 1e-6."""
    if isinstance(stock, dict):
        assert sorted(ours) == sorted(stock), where
        for key in stock:
            assert_close(ours[key], stock[key], where)
    elif isinstance(stock, list):
        assert len(ours) == len(stock), where
        for a, b in zip(ours, stock):
            assert_close(a, b, where)
    elif isinstance(stock, float):
        assert ours == pytest.approx(stock, rel=1e-6, abs=1e-9), where
    else:
        assert ours == stock, where


def failures(output_dir):
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


# TFMA's note on a slice whose jackknife left some samples empty ("CI not computed because only
# N samples were non-empty"); such a slice has no intervals.
ERROR = tfma.metrics.MetricKey('__ERROR__')
# Below this many examples a slice may miss one of the 20 jackknife partitions (each example's
# partition is drawn at random, unseeded in TFMA): 20 * (19/20)**n < 0.1% from n = 150 on.
SMALL_SLICE = 150


def _random_notes(stock: dict, ours: dict) -> set:
    """The slices where either side has TFMA's empty-partition note: both draw partitions at
    random, so on a slice this small the note may come out on one side only."""
    noted = {k for side in (stock, ours) for k, v in side.items() if ERROR in v}
    count = tfma.metrics.MetricKey('example_count')
    for key in noted:
        assert stock[key].get(count, ours[key].get(count, 0)) < SMALL_SLICE, key
    return noted


def assert_same(stock_dir, ours_dir, not_compared=()):
    """The same slices, metric keys, values (but those of the metrics named in `not_compared`),
    checks and intervals."""
    stock, ours = values(stock_dir), values(ours_dir)
    assert sorted(ours, key=str) == sorted(stock, key=str)
    noted = _random_notes(stock, ours)
    for sliced, stock_values in stock.items():
        stock_keys = sorted((k for k in stock_values if k != ERROR), key=str)
        assert sorted((k for k in ours[sliced] if k != ERROR), key=str) == stock_keys, sliced
        for key, value in stock_values.items():
            if key.name in not_compared or key == ERROR:
                continue
            assert ours[sliced][key] == pytest.approx(value, rel=1e-6, abs=1e-9), (
                sliced,
                key,
            )
    assert failures(ours_dir) == failures(stock_dir)
    # Confidence intervals on the same metrics (jackknife partitions are random in both, so the
    # bounds differ; `results_test` checks ours against TFMA's formula).
    ours_intervals, stock_intervals = (
        sorted((k for k in intervals(d) if k[0] not in noted), key=str)
        for d in (ours_dir, stock_dir)
    )
    assert ours_intervals == stock_intervals
    stock_plots, ours_plots = plots(stock_dir), plots(ours_dir)
    assert sorted(ours_plots, key=str) == sorted(stock_plots, key=str)
    for key, plot in stock_plots.items():
        assert_close(ours_plots[key], plot, key)
    return ours


def run_stock(eval_config, model_paths: dict, data_location: str, output_path: str) -> None:
    """Stock TFMA (`tfma.run_model_analysis`, the engine inside TFX's Evaluator) on the same
    examples and models: `model_paths` maps each model spec's name ('' for a single model) to its
    SavedModel directory."""
    shared = [
        tfma.default_eval_shared_model(path, eval_config=eval_config, model_name=name)
        for name, path in model_paths.items()
    ]
    tfma.run_model_analysis(
        eval_shared_model=shared[0] if len(shared) == 1 else shared,
        eval_config=eval_config,
        data_location=data_location,
        output_path=output_path,
    )
