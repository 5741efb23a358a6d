"""The benchmark tables: a marked place on a page is rewritten from its JSON, exactly; the prose
around it is left as it was."""

import json

import pytest

from asynctrain.docs_generation import benchmark_tables

TRANSFORM_RESULT = {
    'rows_per_span': 20000,
    'window_a': '1-7',
    'window_b': '2-8',
    'statistics': False,
    'seconds': {'a_first_window': 100.0, 'b_with_cache': 90.0, 'c_without_cache': 60.0},
    'cpu_seconds': {'a_first_window': 99.0, 'b_with_cache': 80.0, 'c_without_cache': 64.0},
    'ratio_b_over_c': 1.5,
    'cpu_ratio_b_over_c': 1.25,
    'outputs_match': True,
    'compared_rows': 46669,
    'vocabularies_equal': {'company': True, 'payment_type': True},
    'machine': {'cpus': 2, 'platform': 'Linux-x86_64', 'python': '3.10.13'},
    'finished_at': '2026-11-29T23:55:36Z',
}
PAGE = """\
# Benchmarks

Prose before.

<!-- table: transform bench_transform.json -->
an old table
<!-- end table -->

Prose after.
"""


def test_a_marked_table_is_rewritten_from_its_json_and_nothing_else_changes(tmp_path):
    (tmp_path / 'bench_transform.json').write_text(json.dumps(TRANSFORM_RESULT))

    page = benchmark_tables.fill(PAGE, str(tmp_path))

    assert page == (
        '# Benchmarks\n\nProse before.\n\n'
        '<!-- table: transform bench_transform.json -->\n'
        '| spans 2-8 | wall | CPU |\n'
        '|---|---|---|\n'
        '| with the analyzer cache | 90.0 s | 80.0 s |\n'
        '| cache disabled | 60.0 s | 64.0 s |\n'
        '| ratio | **1.50× slower with the cache** | 1.25× |\n'
        '\n'
        '20,000 rows per span, Transform statistics off; writing the cache for spans 1-7: '
        '100.0 s. Outputs identical on 46,669 eval examples; 2 of 2 vocabularies equal.\n'
        '\n'
        'From [bench_transform.json](bench_transform.json): finished 2026-11-29 23:55:36 UTC, '
        '2 CPUs, Python 3.10.13, Linux-x86_64.\n'
        '<!-- end table -->\n\nProse after.\n'
    )
    assert benchmark_tables.fill(page, str(tmp_path)) == page


def test_a_cache_that_wins_is_reported_as_faster(tmp_path):
    result = {**TRANSFORM_RESULT, 'ratio_b_over_c': 0.8}
    (tmp_path / 'bench_transform.json').write_text(json.dumps(result))

    page = benchmark_tables.fill(PAGE, str(tmp_path))

    assert '| ratio | **1.25× faster with the cache** | 1.25× |' in page


def test_the_wide_vocabularies_table_gives_both_sides_their_ratio_and_the_agreement(tmp_path):
    result = {
        'rows': 5822,
        'columns': 85,
        'seconds': {'stock': 80.0, 'ours': 20.0},
        'cpu_seconds': {'stock': 70.0, 'ours': 14.0},
        'speedup_stock_over_ours': 4.0,
        'cpu_speedup_stock_over_ours': 5.0,
        'outputs_match': True,
        'vocabularies': 85,
    }
    (tmp_path / 'wide.json').write_text(json.dumps(result))

    page = benchmark_tables.fill(
        '<!-- table: transform_vocabularies wide.json -->\n<!-- end table -->\n', str(tmp_path)
    )

    assert page == (
        '<!-- table: transform_vocabularies wide.json -->\n'
        '|  | wall | CPU |\n'
        '|---|---|---|\n'
        '| stock: one `tft.vocabulary` per column | 80.0 s | 70.0 s |\n'
        '| **ours**: one analyzer for all columns | 20.0 s | 14.0 s |\n'
        '| stock / ours | **4.00×** | 5.00× |\n'
        '\n'
        '5,822 rows × 85 vocabulary columns; the 85 vocabularies and the transformed values '
        'identical.\n'
        '\n'
        'From [wide.json](wide.json).\n'
        '<!-- end table -->\n'
    )


def test_an_unknown_table_kind_is_refused_naming_it(tmp_path):
    page = '<!-- table: tables_of_wonder x.json -->\n<!-- end table -->\n'

    with pytest.raises(ValueError, match="unknown table 'tables_of_wonder'"):
        benchmark_tables.fill(page, str(tmp_path))


def test_the_step_comparison_pairs_each_layout_of_the_two_runs():
    def run(*ratios):
        layouts = [(1, 1, 'fixed_shards'), (2, 2, 'min_shard_size')]
        return {
            'configs': [
                {'num_workers': w, 'num_ps': p, 'partitioner': part, 'vs_fit': r}
                for (w, p, part), r in zip(layouts, ratios)
            ]
        }

    lines = benchmark_tables.step_comparison(run(0.72, 0.83), run(1.27, 1.16))

    assert lines[2:] == ['| 1 | 1 | 0.72 | 1.27 |', '| 2 | 2, min shard size | 0.83 | 1.16 |']


def _pipeline_result(rows: int, ours_peaks: dict, stock: dict | None = None) -> dict:
    ours = {
        'total_seconds': 100.0,
        'component_seconds': {name: 10.0 for name in ours_peaks},
        'component_peak_mb': ours_peaks,
        'component_order': list(ours_peaks),
        'peak_mb': max(ours_peaks.values()),
        'eval_metric': ['auc', 0.9],
        'blessed': True,
    }
    stock = stock or {
        'total_seconds': 400.0,
        'component_seconds': {name: 40.0 for name in ours_peaks},
        'component_peak_mb': {name: 2000.0 for name in ours_peaks},
        'component_order': list(ours_peaks),
        'peak_mb': 2000.0,
        'eval_metric': ['auc', 0.89],
        'blessed': True,
    }
    return {
        'rows': rows,
        'train_steps': 1000,
        'variants': {'stock': stock, 'ours': ours},
        'total_stock_over_ours': stock['total_seconds'] / ours['total_seconds'],
        'finished_at': '2026-12-02T08:00:00Z',
    }


def test_stock_extrapolated_by_the_rows_is_said_so_and_has_no_memory():
    from asynctrain.benchmarks import pipeline as pipeline_bench

    measured = _pipeline_result(1_000_000, {'Transform': 1000.0, 'Trainer': 2000.0})
    stock = pipeline_bench.extrapolated_stock(measured, 5_000_000)
    assert stock['total_seconds'] == 2000.0
    assert stock['component_seconds'] == {'Transform': 200.0, 'Trainer': 200.0}
    assert 'component_peak_mb' not in stock and 'eval_metric' not in stock
    assert stock['extrapolated_from'] == {
        'rows': 1_000_000,
        'train_steps': 1000,
        'finished_at': '2026-12-02T08:00:00Z',
    }
    result = _pipeline_result(5_000_000, {'Transform': 1000.0, 'Trainer': 2000.0}, stock)
    table = benchmark_tables.pipeline_components(result)
    assert table[0] == (
        '| component | stock (extrapolated) | ours | stock / ours | peak MiB stock | peak MiB ours |'
    )
    assert table[2] == '| Transform | 200.0 s | 10.0 s | 20.00 | – | 1,000 |'
    assert table[4].endswith('| 2,000.0 s | 100.0 s | **20.00** | – | 2,000 |')
    assert 'Stock not run: its times are its run at 1,000,000 rows' in table[-1]
    assert 'ours blessed' in table[-1]


def test_the_memory_table_gives_each_components_change_from_the_smallest_size():
    small = _pipeline_result(1_000_000, {'Transform': 1000.0, 'ExampleBatcher': 1200.0})
    large = _pipeline_result(5_000_000, {'Transform': 1100.0, 'ExampleBatcher': 1188.0})
    assert benchmark_tables.pipeline_memory(large, small) == [
        '| component | peak MiB at 1,000,000 rows | peak MiB at 5,000,000 rows | change |',
        '|---|---|---|---|',
        '| Transform | 1,000 | 1,100 | +10.0% |',
        '| ExampleBatcher | 1,200 | 1,188 | -1.0% |',
        '| whole run | 1,200 | 1,188 | -1.0% |',
    ]


def test_a_stock_component_ours_has_not_gets_its_own_row_after_ours():
    """Stock's StatisticsGen: ours' ExampleGen computes the statistics, so no time of ours."""
    ours_peaks = {'CsvExampleGen': 900.0, 'Transform': 1000.0}
    stock = {
        'total_seconds': 400.0,
        'component_seconds': {'CsvExampleGen': 300.0, 'StatisticsGen': 60.0, 'Transform': 40.0},
        'component_peak_mb': {
            'CsvExampleGen': 2000.0,
            'StatisticsGen': 2100.0,
            'Transform': 2200.0,
        },
        'component_order': ['CsvExampleGen', 'StatisticsGen', 'Transform'],
        'peak_mb': 2200.0,
    }
    table = benchmark_tables.pipeline_components(_pipeline_result(1000, ours_peaks, stock))
    assert table[2:5] == [
        '| CsvExampleGen | 300.0 s | 10.0 s | 30.00 | 2,000 | 900 |',
        '| Transform | 40.0 s | 10.0 s | 4.00 | 2,200 | 1,000 |',
        '| StatisticsGen | 60.0 s | – | – | 2,100 | – |',
    ]


def test_the_preprocess_table_gives_both_paths_their_ratio_and_the_records_verdict():
    result = {
        'rows': 1000,
        'paths': {
            'graph_only': {
                'parquet_seconds': 0.5,
                'transform_seconds': 3.5,
                'batcher_seconds': 1.0,
                'seconds': 5.0,
            },
            'materialized': {'transform_seconds': 9.0, 'batcher_seconds': 1.0, 'seconds': 10.0},
        },
        'materialized_over_graph_only': 2.0,
        'records_agree': {
            'train': {'rows': 700, 'exactly_equal': True, 'equal': True},
            'eval': {'rows': 300, 'exactly_equal': False, 'equal': False},
        },
    }
    table = benchmark_tables.preprocess(result)
    # The materialized path writes no Parquet copy.
    assert table[2].endswith('| – | 9.0 s | 1.0 s | 10.0 s |')
    assert table[3].endswith('| 0.5 s | 3.5 s | 1.0 s | 5.0 s |')
    assert table[-1] == (
        '1,000 rows; **2.00×**. The two sets of records, row by row: train 700 rows bit-equal, '
        'eval 300 rows **differ**.'
    )


def _ours(seconds: dict, total: float, peak: float, **extra) -> dict:
    return {
        'rows': 1_000_000,
        'train_steps': 1000,
        **extra,
        'variants': {
            'ours': {
                'component_seconds': seconds,
                'component_peak_mb': {name: peak for name in seconds},
                'total_seconds': total,
                'peak_mb': peak,
            }
        },
    }


def test_runners_and_the_cost_model_from_the_measured_seconds():
    stages = ('CsvExampleGen', 'Transform', 'ExampleBatcher', 'Evaluator', 'Trainer')
    direct = _ours(dict(zip(stages, (16.0, 14.0, 8.0, 12.0, 20.0))), 80.0, 1000.0)
    processes = _ours(
        dict(zip(stages, (20.0, 30.0, 10.0, 25.0, 25.0))),
        120.0,
        2500.0,
        beam_args=['--direct_running_mode=multi_processing', '--direct_num_workers=2'],
    )
    spark = _ours(dict(zip(stages, (40.0, 50.0, 30.0, 36.0, 20.0))), 200.0, 6000.0, spark_workers=2)
    table = benchmark_tables.runners(direct, processes, spark)
    assert table[0] == (
        '| stage | in memory | multi-processing | Spark, 2 Workers | peak MiB, in memory '
        '| peak MiB, multi-processing | peak MiB, Spark, 2 Workers |'
    )
    assert '| ExampleBatcher | 8.0 s | 10.0 s | 30.0 s | 1,000 | 2,500 | 6,000 |' in table
    assert '| whole run | **80.0 s** | **120.0 s** | **200.0 s** | 1,000 | 2,500 | 6,000 |' in table

    cost = benchmark_tables.cost_model(direct, spark)
    # ExampleBatcher: 8 s / 1e6 rows = 8.0 µs; Spark 30 s x 2 Workers / 1e6 = 60.0 core-µs;
    # 10^9 rows x 60 µs = 60,000 core-s: 1.67 h on 10 workers, 0.17 h on 100, 0.02 h on 1,000.
    assert '| ExampleBatcher | 8.0 | 60.0 | 1.67 h | 0.17 h | 0.02 h |' in cost
    # All four: (80 + 100 + 60 + 72) core-µs x 10^9 / 10 workers = 8.67 h.
    assert '| all four |  |  | **8.67 h** | **0.87 h** | **0.09 h** |' in cost


def test_the_batcher_table_gives_both_writers_at_each_size_smallest_first():
    large = {
        'rows': 5_000_000,
        'source_mb': 284.8,
        'one_process': {'seconds': 88.7, 'cpu_seconds': 57.5, 'peak_rss_mb': 1112.0},
        'byte_identical': True,
    }
    small = {
        'rows': 1_000_000,
        'source_mb': 57.0,
        'one_process': {'seconds': 15.5, 'cpu_seconds': 10.0, 'peak_rss_mb': 991.9},
        'beam': {'seconds': 14.9, 'cpu_seconds': 14.0, 'peak_rss_mb': 3255.9},
        'byte_identical': True,
    }
    table = benchmark_tables.batcher(large, small)
    assert table[2:] == [
        '| 1,000,000 | 57.0 | 15.5 s | 10.0 s | 992 | 14.9 s | 14.0 s | 3,256 | yes |',
        '| 5,000,000 | 284.8 | 88.7 s | 57.5 s | 1,112 | – | – | – | yes |',
    ]
