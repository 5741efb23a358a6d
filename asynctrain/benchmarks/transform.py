"""`asynctrain bench transform`: a rolling window of daily spans, Transform with vs without cache.

Eight daily spans of taxi-like examples are resampled from the bundled CSV. Run A transforms the
window of spans 1-7 with the analyzer cache on, as a daily pipeline does, and writes its cache.
The window then moves by one day (spans 2-8) and the stock Transform executor runs twice on it:
B reads A's cache, so only span 8 is analyzed afresh; C has the cache disabled and re-analyzes all
seven spans (`--window` changes the seven, for quick checks). B's and C's wall times are reported
side by side with their ratio, and both transform graphs are applied to the same raw examples to
check that they agree feature by feature.

    asynctrain bench transform [--rows-per-span N] [--window DAYS] [--output DIR]
                               [--disable-statistics] [-- BEAM_ARGS...]
    asynctrain bench transform --wide-vocabularies [--wide-rows N] [--wide-columns N]
                               [--output DIR]

The second form is `transform_vocabularies`: many vocabulary columns, stock against ours.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sys

from asynctrain.benchmarks import report
from asynctrain.testing import taxi_data

DEFAULT_WINDOW = 7
DEFAULT_ROWS_PER_SPAN = 20000
DEFAULT_OUTPUT = os.path.join('bench_out', 'transform')


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        '--rows-per-span',
        type=int,
        default=DEFAULT_ROWS_PER_SPAN,
        help=f'examples per daily span, 2/3 train and 1/3 eval (default {DEFAULT_ROWS_PER_SPAN})',
    )
    parser.add_argument(
        '--window',
        type=int,
        default=DEFAULT_WINDOW,
        help=f'spans per window (default {DEFAULT_WINDOW}); window + 1 are written',
    )
    parser.add_argument(
        '--output',
        default=DEFAULT_OUTPUT,
        help=f'directory for spans, runs, result.json and the chart '
        f'(default {DEFAULT_OUTPUT}); emptied first',
    )
    parser.add_argument(
        '--features',
        metavar='NAME[,NAME]',
        default=None,
        help='transform only these features of the taxi feature config (default: all 16); '
        'a quick check of the bench itself needs no more than one per kind of transform',
    )
    parser.add_argument(
        '--wide-vocabularies',
        action='store_true',
        help='instead of the cache windows: a wide table of integer codes, every column a '
        'vocabulary feature, analyzed with one stock vocabulary analyzer per column and with ours',
    )
    parser.add_argument(
        '--wide-rows', type=int, default=5822, help='rows of the wide table (default 5822)'
    )
    parser.add_argument(
        '--wide-columns', type=int, default=85, help='columns of the wide table (default 85)'
    )
    parser.add_argument(
        '--disable-statistics',
        action='store_true',
        help='run Transform without its pre/post-transform statistics (the '
        'pipeline computes them, so they are on by default)',
    )


_progress = report.progress('transform')


def write_chart(result: dict, path: str) -> None:
    """Bar chart of the three runs' wall times, B and C (the comparison) side by side."""
    import matplotlib

    matplotlib.use('Agg')
    from matplotlib import pyplot as plt

    seconds = result['seconds']
    labels = [
        f'A: spans {result["window_a"]}\ncache written',
        f"B: spans {result['window_b']}\nwith A's cache",
        f'C: spans {result["window_b"]}\ncache disabled',
    ]
    values = [seconds['a_first_window'], seconds['b_with_cache'], seconds['c_without_cache']]
    figure, axes = plt.subplots(figsize=(7, 4))
    bars = axes.bar(labels, values, color=['#9e9e9e', '#1f77b4', '#ff7f0e'])
    axes.bar_label(bars, fmt='%.1f s')
    axes.set_ylabel('wall time of Transform executor (s)')
    axes.set_title(
        f'Transform, window moved by a day: B/C = {result["ratio_b_over_c"]:.2f} '
        f'({result["rows_per_span"]} rows per span)'
    )
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def select_features(config, features: str | None):
    """The taxi feature config cut to the comma-separated `features` (all of them when None).

    Raises:
      ValueError: a feature is not in the config; the message names it and the config's.
    """
    from asynctrain.testing import transform_runs as runs

    if not features:
        return config
    wanted = [name.strip() for name in features.split(',') if name.strip()]
    unknown = sorted(set(wanted) - set(config.names))
    if unknown:
        raise ValueError(
            f'--features: {unknown} not in {runs.TAXI_FEATURES}; its features: {list(config.names)}'
        )
    return dataclasses.replace(
        config, features=tuple(f for f in config.features if f.name in wanted)
    )


def write_spans(output: str, spans: int, rows_per_span: int) -> dict:
    """Daily spans 1 to `spans` resampled from the taxi CSV: their Examples artifacts by span."""
    from asynctrain.components.shared import feature_types
    from asynctrain.testing import transform_runs as runs

    schema_proto = feature_types.load_schema(str(runs.TAXI_SCHEMA))
    table = runs.read_taxi_table(schema_proto)
    _progress(f'read {table.num_rows} rows of {taxi_data.taxi_csv_path()}')
    examples = {}
    for span in range(1, spans + 1):
        uri = runs.write_span(
            os.path.join(output, 'examples'),
            span,
            runs.resample_span(table, span, rows_per_span),
        )
        examples[span] = runs.examples_artifact(uri, span)
        _progress(f'wrote span {span}/{spans}: {rows_per_span} examples')
    return examples


def run_windows(examples: dict, window: int, output: str, **common) -> tuple:
    """Runs A on spans 1 to `window` (cache written), then B (A's cache) and C (none) a day on."""
    from asynctrain.testing import transform_runs as runs

    schema = runs.schema_artifact(runs.TAXI_SCHEMA, os.path.join(output, 'schema'))
    window_a = [examples[s] for s in range(1, window + 1)]
    window_b = [examples[s] for s in range(2, window + 2)]
    _progress(f'run A: spans 1-{window}, analyzer cache written')
    a = runs.run_transform(window_a, schema, os.path.join(output, 'a'), **common)
    _progress(f'run A: {a.seconds:.1f} s ({a.cpu_seconds:.1f} s CPU)')
    _progress(f"run B: spans 2-{window + 1} with A's cache (analyzes span {window + 1} only)")
    b = runs.run_transform(
        window_b,
        schema,
        os.path.join(output, 'b'),
        analyzer_cache=a.updated_analyzer_cache,
        **common,
    )
    _progress(f'run B: {b.seconds:.1f} s ({b.cpu_seconds:.1f} s CPU)')
    _progress(f'run C: spans 2-{window + 1}, cache disabled (analyzes all {window} spans)')
    c = runs.run_transform(
        window_b, schema, os.path.join(output, 'c'), disable_analyzer_cache=True, **common
    )
    _progress(f'run C: {c.seconds:.1f} s ({c.cpu_seconds:.1f} s CPU)')
    return a, b, c


def compare_outputs(examples: dict, b, c, window: int, config):
    """B's and C's transform graphs applied to the raw eval examples of spans 2 to `window` + 1."""
    from asynctrain.testing import transform_runs as runs

    _progress(f'comparing B and C on the raw eval examples of spans 2-{window + 1}')
    raw = []
    for span in range(2, window + 2):
        raw += runs.read_tfrecord_gzip(os.path.join(examples[span].uri, 'Split-eval', '*'))
    return runs.compare_transform_graphs(b.transform_graph, c.transform_graph, raw, config)


def build_result(args: argparse.Namespace, config, beam_args: list, a, b, c, comparison) -> dict:
    """The result JSON: the run's settings, the three runs' times, their ratios and agreement."""
    from asynctrain.testing import transform_runs as runs

    window = args.window
    return {
        'benchmark': 'transform',
        'rows_per_span': args.rows_per_span,
        'spans': window + 1,
        'window_a': f'1-{window}',
        'window_b': f'2-{window + 1}',
        'statistics': not args.disable_statistics,
        'features': list(config.names),
        'beam_args': beam_args,
        'seconds': {
            'a_first_window': a.seconds,
            'b_with_cache': b.seconds,
            'c_without_cache': c.seconds,
        },
        'cpu_seconds': {
            'a_first_window': a.cpu_seconds,
            'b_with_cache': b.cpu_seconds,
            'c_without_cache': c.cpu_seconds,
        },
        'ratio_b_over_c': b.seconds / c.seconds,
        'speedup_c_over_b': c.seconds / b.seconds,
        'cpu_ratio_b_over_c': b.cpu_seconds / c.cpu_seconds,
        'cache_written': {
            'a': runs.cached_datasets(a.updated_analyzer_cache),
            'b': runs.cached_datasets(b.updated_analyzer_cache),
        },
        'outputs_match': comparison.outputs_match,
        'compared_rows': comparison.rows,
        'mismatched_features': list(comparison.mismatched_features),
        'feature_max_abs_diff': dict(comparison.feature_max_abs_diff),
        'vocabularies_equal': dict(comparison.vocabularies_equal),
        'machine': report.machine(),
        'finished_at': report.finished_at(),
    }


def print_summary(result: dict, result_path: str, chart_path: str) -> None:
    """Prints B's and C's times side by side, their ratios, the verdict and the files written."""
    spans = result['spans']
    seconds, cpu_seconds = result['seconds'], result['cpu_seconds']
    b, b_cpu = seconds['b_with_cache'], cpu_seconds['b_with_cache']
    c, c_cpu = seconds['c_without_cache'], cpu_seconds['c_without_cache']
    print(f'\n{"run":<34}{"wall time":>12}{"CPU time":>12}')
    print(f'{f"B  spans 2-{spans}, with cache":<34}{b:>10.1f} s{b_cpu:>10.1f} s')
    print(f'{f"C  spans 2-{spans}, cache disabled":<34}{c:>10.1f} s{c_cpu:>10.1f} s')
    print(
        f'B/C = {result["ratio_b_over_c"]:.2f} wall, {result["cpu_ratio_b_over_c"]:.2f} CPU '
        f'(C/B = {result["speedup_c_over_b"]:.2f}x wall); A (spans {result["window_a"]}) '
        f'{seconds["a_first_window"]:.1f} s'
    )
    verdict = (
        'match'
        if result['outputs_match']
        else (f'DIFFER: {", ".join(result["mismatched_features"]) or "vocabularies"}')
    )
    print(f'outputs of B and C on {result["compared_rows"]} raw examples: {verdict}')
    print(f'wrote {result_path} and {chart_path}')


def run(args: argparse.Namespace) -> int:
    """The bench: write the spans, run A, B and C, compare B with C, write and print the report."""
    if args.wide_vocabularies:
        from asynctrain.benchmarks import transform_vocabularies

        return transform_vocabularies.run(args)
    if args.rows_per_span < 3:
        print('--rows-per-span: expected at least 3 (train and eval need rows)', file=sys.stderr)
        return 2
    if args.window < 1:
        print('--window: expected a positive number of spans', file=sys.stderr)
        return 2
    _progress('loading TensorFlow Transform and TFX')
    from asynctrain.components.transform import feature_config as fc
    from asynctrain.testing import transform_runs as runs

    config = fc.load_feature_config(str(runs.TAXI_FEATURES), str(runs.TAXI_SCHEMA))
    try:
        config = select_features(config, args.features)
    except ValueError as error:
        print(error, file=sys.stderr)
        return 2
    output = os.path.abspath(args.output)
    shutil.rmtree(output, ignore_errors=True)
    os.makedirs(output)
    beam_args = list(getattr(args, 'beam_args', []) or [])
    examples = write_spans(output, args.window + 1, args.rows_per_span)
    a, b, c = run_windows(
        examples,
        args.window,
        output,
        config=config,
        disable_statistics=args.disable_statistics,
        beam_args=beam_args,
    )
    comparison = compare_outputs(examples, b, c, args.window, config)
    result = build_result(args, config, beam_args, a, b, c, comparison)
    result_path, chart_path = report.write_result(output, result, 'transform.png', write_chart)
    print_summary(result, result_path, chart_path)
    return 0 if comparison.outputs_match else 1
