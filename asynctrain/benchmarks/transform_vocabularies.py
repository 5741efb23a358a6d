"""`asynctrain bench transform --wide-vocabularies`: Transform's analysis of a wide table whose
columns are all `vocabulary` features, one stock vocabulary analyzer per column against ours.

The table stands in for COIL 2000 (5,822 rows of 85 integer codes, `asynctrain.testing.
wide_vocabulary_table`). Both sides analyze and transform the same rows in one process on Beam's
DirectRunner, stock first: `tft.vocabulary` and `tft.apply_vocabulary` per column (what
`tft.compute_and_apply_vocabulary` does), then our generated `preprocessing_fn`. Their wall and CPU
times are reported side by side with the ratio, and their vocabulary files and transformed values
are checked to agree.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil

from asynctrain.benchmarks import report

_progress = report.progress('transform --wide-vocabularies')


def compare(stock, ours) -> dict:
    """Whether the two analyses wrote the same vocabularies and transformed every row alike."""
    import numpy as np

    same_features = sorted(stock.transformed) == sorted(ours.transformed)
    mismatched = sorted(
        name
        for name in stock.transformed
        if name not in ours.transformed
        or not np.array_equal(stock.transformed[name], ours.transformed[name])
    )
    vocabularies_equal = stock.vocabularies == ours.vocabularies
    return {
        'outputs_match': same_features and not mismatched and vocabularies_equal,
        'mismatched_features': mismatched,
        'vocabularies': len(ours.vocabularies),
        'vocabularies_equal': vocabularies_equal,
    }


def run(args: argparse.Namespace) -> int:
    """Generates the table, analyzes it both ways, compares, writes and prints the report."""
    _progress('loading TensorFlow Transform')
    from asynctrain.components.transform import preprocessing
    from asynctrain.testing import wide_vocabulary_table as table

    output = os.path.abspath(args.output)
    shutil.rmtree(output, ignore_errors=True)
    os.makedirs(output)
    rows = table.generate_rows(args.wide_rows, args.wide_columns)
    config = table.feature_config(args.wide_columns)
    schema = table.schema(args.wide_columns)
    _progress(f'{args.wide_rows} rows x {args.wide_columns} vocabulary columns; stock first')
    stock = table.analyze_and_transform(
        rows, schema, table.stock_preprocessing_fn(config), os.path.join(output, 'stock')
    )
    _progress(f'stock: {stock.seconds:.1f} s ({stock.cpu_seconds:.1f} s CPU)')
    ours = table.analyze_and_transform(
        rows, schema, preprocessing.build_preprocessing_fn(config), os.path.join(output, 'ours')
    )
    _progress(f'ours: {ours.seconds:.1f} s ({ours.cpu_seconds:.1f} s CPU)')
    result = {
        'benchmark': 'transform_vocabularies',
        'rows': args.wide_rows,
        'columns': args.wide_columns,
        'seconds': {'stock': stock.seconds, 'ours': ours.seconds},
        'cpu_seconds': {'stock': stock.cpu_seconds, 'ours': ours.cpu_seconds},
        'speedup_stock_over_ours': stock.seconds / ours.seconds,
        'cpu_speedup_stock_over_ours': stock.cpu_seconds / ours.cpu_seconds,
        **compare(stock, ours),
        'machine': report.machine(),
        'finished_at': report.finished_at(),
    }
    path = os.path.join(output, 'result.json')
    with open(path, 'w') as f:
        json.dump(result, f, indent=2)
    print(f'\n{"side":<40}{"wall time":>12}{"CPU time":>12}')
    print(
        f'{"stock: one tft.vocabulary per column":<40}{stock.seconds:>10.1f} s'
        f'{stock.cpu_seconds:>10.1f} s'
    )
    print(
        f'{"ours: one analyzer for all columns":<40}{ours.seconds:>10.1f} s'
        f'{ours.cpu_seconds:>10.1f} s'
    )
    print(
        f'stock/ours = {result["speedup_stock_over_ours"]:.2f}x wall, '
        f'{result["cpu_speedup_stock_over_ours"]:.2f}x CPU'
    )
    verdict = 'match' if result['outputs_match'] else 'DIFFER'
    print(f'vocabularies ({result["vocabularies"]}) and transformed values: {verdict}')
    print(f'wrote {path}')
    return 0 if result['outputs_match'] else 1
