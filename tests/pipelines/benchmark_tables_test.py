"""The benchmark tables: a marked place on a page is rewritten from its JSON, exactly; the prose
around it is left as it was."""

import json

import pytest

from pipelines import benchmark_tables

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
