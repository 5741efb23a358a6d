"""`asynctrain bench transform` at a tiny size: the report it writes, not the speed it measures."""

import json
import re

import pytest

from asynctrain import cli

pytestmark = pytest.mark.integration

# One of each kind of transform in the taxi feature config, in its order.
FEATURES = ('fare', 'company', 'trip_start_hour', 'pickup_latitude')


def test_bench_writes_side_by_side_times_and_checks_outputs_agree(tmp_path, capsys):
    output = tmp_path / 'bench'
    # Two-span windows and one feature per kind of transform keep the three executor runs short;
    # the defaults are seven spans and the 16 features.
    code = cli.main(
        [
            'bench',
            'transform',
            '--rows-per-span',
            '60',
            '--window',
            '2',
            '--disable-statistics',
            '--features',
            ','.join(FEATURES),
            '--output',
            str(output),
        ]
    )

    assert code == 0
    result = json.loads((output / 'result.json').read_text())
    assert result['rows_per_span'] == 60
    assert (result['spans'], result['window_a'], result['window_b']) == (3, '1-2', '2-3')
    seconds = result['seconds']
    assert set(seconds) == {'a_first_window', 'b_with_cache', 'c_without_cache'}
    assert all(value > 0 for value in seconds.values())
    assert set(result['cpu_seconds']) == set(seconds)
    assert all(value > 0 for value in result['cpu_seconds'].values())
    assert result['ratio_b_over_c'] == pytest.approx(
        seconds['b_with_cache'] / seconds['c_without_cache']
    )
    assert result['outputs_match'] is True
    assert result['mismatched_features'] == []
    assert result['compared_rows'] == 2 * 20  # the eval third of spans 2 and 3
    assert result['features'] == list(FEATURES)
    # The features and the label, each compared.
    assert set(result['feature_max_abs_diff']) == {*FEATURES, 'big_tipper'}
    # The one vocabulary of the graph (company's), the same from B's cache as from C's analysis.
    assert len(result['vocabularies_equal']) == 1 and all(result['vocabularies_equal'].values())
    assert result['cache_written'] == {
        'a': ['Span-1/Split-train', 'Span-2/Split-train'],
        'b': ['Span-2/Split-train', 'Span-3/Split-train'],
    }
    png = (output / 'transform.png').read_bytes()
    assert png.startswith(b'\x89PNG\r\n\x1a\n') and len(png) > 5000
    printed = capsys.readouterr().out
    assert re.search(r'^\[bench transform \d\d:\d\d:\d\d\] run B', printed, re.M)
    assert 'B/C = ' in printed


def test_wide_vocabularies_reports_stock_and_ours_side_by_side_with_agreeing_outputs(
    tmp_path, capsys
):
    output = tmp_path / 'wide'
    # Four columns of 300 rows: the case's 85 of 5,822 take minutes.
    code = cli.main(
        [
            'bench',
            'transform',
            '--wide-vocabularies',
            '--wide-rows',
            '300',
            '--wide-columns',
            '4',
            '--output',
            str(output),
        ]
    )

    assert code == 0
    result = json.loads((output / 'result.json').read_text())
    assert (result['benchmark'], result['rows'], result['columns']) == (
        'transform_vocabularies',
        300,
        4,
    )
    seconds, cpu = result['seconds'], result['cpu_seconds']
    assert set(seconds) == set(cpu) == {'stock', 'ours'}
    assert all(value > 0 for value in [*seconds.values(), *cpu.values()])
    assert result['speedup_stock_over_ours'] == pytest.approx(seconds['stock'] / seconds['ours'])
    # Four vocabularies, the same files and the same ids on both sides, the label too.
    assert result['vocabularies'] == 4 and result['vocabularies_equal'] is True
    assert result['outputs_match'] is True and result['mismatched_features'] == []
    printed = capsys.readouterr().out
    assert 'stock/ours = ' in printed and 'transformed values: match' in printed
