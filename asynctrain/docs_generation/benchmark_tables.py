"""The tables of `docs/benchmarks.md`, written from the benches' committed JSON results.

The page is hand-written prose with marked places for tables:

    <!-- table: pipeline_components bench_pipeline.json -->
    (whatever `fill` writes here)
    <!-- end table -->

`fill` replaces each marked body with the table that `TABLES[kind]` renders from the named JSON
files (paths relative to the page), followed by the line saying when and on what machine the
figures were measured, so a figure on the page is always the one in its JSON.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Sequence
from typing import Any

MARKER = re.compile(
    r'(<!-- table: (?P<kind>\w+) (?P<files>[^>]+?) -->\n)(?P<body>.*?)(<!-- end table -->)',
    re.DOTALL,
)
Result = dict[str, Any]


def _n(value: float, digits: int = 0) -> str:
    return f'{value:,.{digits}f}'


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return [
        '| ' + ' | '.join(header) + ' |',
        '|' + '---|' * len(header),
        *('| ' + ' | '.join(row) + ' |' for row in rows),
    ]


def examplegen(result: Result) -> list[str]:
    variants = result['variants']
    names = {'stock': 'stock CsvExampleGen', 'ours': 'ours', 'raw': 'raw limit'}
    vs_stock = {'stock': '1×', 'ours': f'**{result["ours_vs_stock"]:.1f}×**', 'raw': ''}
    vs_raw = {'stock': '', 'ours': f'**{result["ours_vs_raw"]:.2f}**', 'raw': '1'}
    rows = [
        [
            names[name],
            f'{v["seconds"]:.2f}',
            _n(v['rows_per_second']),
            f'{_n(v["peak_rss_mb"])} MB',
            vs_stock[name],
            vs_raw[name],
        ]
        for name, v in sorted(variants.items(), key=lambda item: list(names).index(item[0]))
    ]
    splits = ', '.join(
        f'{k.removeprefix("Split-")} {_n(v)}' for k, v in result['rows_per_split'].items()
    )
    agree = 'the same examples' if result['outputs_agree'] else '**different examples**'
    return [
        *_table(['', 'seconds', 'rows/s', 'peak memory', 'vs stock', 'vs raw limit'], rows),
        '',
        f'{_n(result["rows"])} rows ({result["csv_bytes"] / 1e6:.0f} MB); stock and ours wrote '
        f'{agree} in the same splits ({splits}).',
    ]


def transform(result: Result) -> list[str]:
    seconds, cpu = result['seconds'], result['cpu_seconds']
    ratio = result['ratio_b_over_c']
    verdict = 'slower' if ratio > 1 else 'faster'
    rows = [
        [
            'with the analyzer cache',
            f'{seconds["b_with_cache"]:.1f} s',
            f'{cpu["b_with_cache"]:.1f} s',
        ],
        [
            'cache disabled',
            f'{seconds["c_without_cache"]:.1f} s',
            f'{cpu["c_without_cache"]:.1f} s',
        ],
        [
            'ratio',
            f'**{max(ratio, 1 / ratio):.2f}× {verdict} with the cache**',
            f'{result["cpu_ratio_b_over_c"]:.2f}×',
        ],
    ]
    same = 'identical' if result['outputs_match'] else '**different**'
    vocabularies = result['vocabularies_equal']
    return [
        *_table([f'spans {result["window_b"]}', 'wall', 'CPU'], rows),
        '',
        f'{_n(result["rows_per_span"])} rows per span, Transform statistics '
        f'{"on" if result["statistics"] else "off"}; writing the cache for spans '
        f'{result["window_a"]}: {seconds["a_first_window"]:.1f} s. Outputs {same} on '
        f'{_n(result["compared_rows"])} eval examples; {sum(vocabularies.values())} of '
        f'{len(vocabularies)} vocabularies equal.',
    ]


def transform_vocabularies(result: Result) -> list[str]:
    seconds, cpu = result['seconds'], result['cpu_seconds']
    rows = [
        [
            'stock: one `tft.vocabulary` per column',
            f'{seconds["stock"]:.1f} s',
            f'{cpu["stock"]:.1f} s',
        ],
        [
            '**ours**: one analyzer for all columns',
            f'{seconds["ours"]:.1f} s',
            f'{cpu["ours"]:.1f} s',
        ],
        [
            'stock / ours',
            f'**{result["speedup_stock_over_ours"]:.2f}×**',
            f'{result["cpu_speedup_stock_over_ours"]:.2f}×',
        ],
    ]
    same = 'identical' if result['outputs_match'] else '**different**'
    return [
        *_table(['', 'wall', 'CPU'], rows),
        '',
        f'{_n(result["rows"])} rows × {result["columns"]} vocabulary columns; the '
        f'{result["vocabularies"]} vocabularies and the transformed values {same}.',
    ]


_INPUT_NAMES = {
    'upper_bound': 'upper bound: one parsed batch held in memory, no I/O, parsing or iterator',
    'ours': '**ours**: the pre-batched records through `training/data.py` (first epoch, no cache)',
    'ours_cached': 'ours, `input.cache: memory`, after its first epoch',
    'per_example': "per_example: Transform's one `tf.Example` per record",
    'tfx': "TFX's own: `tf_dataset_factory` + `model.fit`",
    'naive': 'naive: per-example parsing, no prefetch, eager step',
}


def training_input(result: Result) -> list[str]:
    rows = []
    for name, v in result['variants'].items():
        stall = f'{v["input_stall_fraction"]:.1%}'
        if v['stall_method'] != 'measured':
            stall += ' (derived)'
        label = _INPUT_NAMES.get(name, name)
        if name == 'naive':
            label += f' ({v["steps"]} steps)'
        if 'first_epoch_examples_per_sec' in v:
            label += f' (first epoch: {_n(v["first_epoch_examples_per_sec"])}/s)'
        ratio = f'{v["ratio_to_upper_bound"]:.2f}'
        rows.append(
            [label, _n(v['examples_per_sec']), f'**{ratio}**' if name == 'ours' else ratio, stall]
        )
    alone = result['input_only_examples_per_sec']
    batched = result['batched']
    return [
        *_table(['input', 'examples/s', 'vs upper bound', 'input stall'], rows),
        '',
        f'Batch {_n(result["batch_size"])}, {_n(result["steps"])} steps, '
        f"{_n(result['data']['examples'])} examples. Ours is {result['ours_vs_tfx']:.1f}× TFX's "
        f'input pipeline and {result["ours_vs_per_example"]:.1f}× per_example. The input '
        f'pipelines alone, with no model: ours {_n(alone["ours"])}/s, per_example '
        f"{_n(alone['per_example'])}/s, TFX's {_n(alone['tfx'])}/s. The ExampleBatcher wrote "
        f'the split at {_n(batched["write_examples_per_sec"])} examples/s, '
        f"{batched['bytes_vs_source']:.2f}× the bytes of Transform's output.",
    ]


def input_widths(result: Result) -> list[str]:
    sweep = result['model_sweep']
    rows = [
        [
            ', '.join(str(u) for u in p['hidden_units']),
            f'{p["upper_bound_examples_per_sec"] / 1e3:.1f}k/s',
            f'{p["ours_examples_per_sec"] / 1e3:.1f}k/s',
            f'{p["ours_ratio_to_upper_bound"]:.2f}',
            f'{p["ours_input_stall_fraction"]:.1%}',
        ]
        for p in sweep['points']
    ]
    return [
        *_table(
            ['hidden units', 'upper bound', 'ours', 'ours / upper bound', 'our input stall'], rows
        ),
        '',
        f'{sweep["steps"]} steps per width, batch {result["batch_size"]}.',
    ]


def _layout(config: Result) -> tuple[str, str]:
    servers = str(config['num_ps'])
    if config['num_ps'] > 1:
        servers += ', ' + config['partitioner'].replace('_', ' ')
    return str(config['num_workers']), servers


def parameter_servers(result: Result) -> list[str]:
    by_layout: dict[tuple[str, str], list[Result]] = {}
    for config in result['configs']:
        by_layout.setdefault(_layout(config), []).append(config)
    rows = []
    for (workers, servers), configs in by_layout.items():
        configs.sort(key=lambda c: c['steps_per_execution'])
        rows.append(
            [
                workers,
                servers,
                ' / '.join(f'{c["steps_per_sec"]:.0f}' for c in configs),
                ' / '.join(f'{c["fit"]["steps_per_sec"]:.0f}' for c in configs),
                ' / '.join(f'{c["vs_fit"]:.2f}' for c in configs),
            ]
        )
    per_execution = ' / '.join(
        str(s) for s in sorted({c['steps_per_execution'] for c in result['configs']})
    )
    return [
        *_table(
            ['workers', 'parameter servers', 'ours steps/s', '`model.fit` steps/s', 'ours / fit'],
            rows,
        ),
        '',
        f'`steps_per_execution` {per_execution}; batch {result["batch_size"]}, '
        f'{_n(result["steps"])} steps, best of {result["repeats"]} rounds; '
        f'{_n(result["examples"])} examples.',
    ]


def step_comparison(while_loop: Result, plain_step: Result) -> list[str]:
    plain = {_layout(c): c['vs_fit'] for c in plain_step['configs']}
    rows = [
        [*_layout(c), f'{c["vs_fit"]:.2f}', f'{plain[_layout(c)]:.2f}']
        for c in while_loop['configs']
    ]
    return _table(
        [
            'workers',
            'parameter servers',
            'ours / fit, step in a while loop',
            'ours / fit, plain step',
        ],
        rows,
    )


def pipeline_components(result: Result) -> list[str]:
    stock, ours = result['variants']['stock'], result['variants']['ours']
    peaks = 'component_peak_mb' in ours
    rows = []
    # Ours' components in its order, then stock's that ours has not (its StatisticsGen).
    names = list(ours['component_order'])
    names += [name for name in stock.get('component_order', ()) if name not in names]
    for name in names:
        if name in ('ImportSchemaGen', 'ExampleValidator', 'Pusher'):
            continue
        ours_s = ours['component_seconds'].get(name)
        stock_s = stock['component_seconds'].get(name)
        both = None not in (ours_s, stock_s)
        row = [
            name,
            f'{stock_s:,.1f} s' if stock_s is not None else '–',
            f'{ours_s:,.1f} s' if ours_s is not None else '–',
            f'{stock_s / ours_s:.2f}' if both else '–',
        ]
        if peaks:
            stock_peak = stock.get('component_peak_mb', {}).get(name)
            ours_peak = ours['component_peak_mb'].get(name)
            row += [_n(p) if p is not None else '–' for p in (stock_peak, ours_peak)]
        rows.append(row)
    total = [
        'total (with ImportSchemaGen, ExampleValidator, Pusher)',
        f'{stock["total_seconds"]:,.1f} s',
        f'{ours["total_seconds"]:,.1f} s',
        f'**{result["total_stock_over_ours"]:.2f}**',
    ]
    extrapolated = stock.get('extrapolated_from')
    header = [
        'component',
        'stock (extrapolated)' if extrapolated else 'stock',
        'ours',
        'stock / ours',
    ]
    if peaks:
        header += ['peak MiB stock', 'peak MiB ours']
        total += [_n(stock['peak_mb']) if 'peak_mb' in stock else '–', _n(ours['peak_mb'])]
    rows.append(total)
    beam = ' '.join(result.get('beam_args') or []) or 'none (in memory, one worker)'
    metrics = []
    for name, variant in (('stock', stock), ('ours', ours)):
        if variant.get('eval_metric'):
            metric, value = variant['eval_metric']
            metrics.append(f'{name} {value:.4f}')
    if extrapolated:
        blessing = (
            f'ours {"blessed" if ours.get("blessed") else "not blessed"}. Stock not run: its '
            f'times are its run at {_n(extrapolated["rows"])} rows '
            f'({extrapolated["finished_at"]}) scaled by the rows'
        )
    else:
        blessed = all(v.get('blessed') for v in (stock, ours))
        blessing = 'both models blessed' if blessed else 'not both blessed'
    return [
        *_table(header, rows),
        '',
        f'{_n(result["rows"])} rows, {_n(result["train_steps"])} training steps; Beam arguments: '
        f'{beam}. Eval {metric if metrics else "metric"}: {", ".join(metrics) or "not recorded"}; '
        f'{blessing}.',
    ]


def pipeline_memory(*results: Result) -> list[str]:
    """Ours' peak memory per component at each size the results measured, and the change from
    the smallest to the largest."""
    results = sorted(results, key=lambda r: r['rows'])
    first, last = results[0]['variants']['ours'], results[-1]['variants']['ours']
    rows = []
    for name in last['component_order']:
        peaks = [r['variants']['ours']['component_peak_mb'].get(name) for r in results]
        change = (
            f'{(peaks[-1] - peaks[0]) / peaks[0]:+.1%}'
            if None not in (peaks[0], peaks[-1])
            else '–'
        )
        rows.append([name, *(_n(p) if p is not None else '–' for p in peaks), change])
    rows.append(
        [
            'whole run',
            *(_n(r['variants']['ours']['peak_mb']) for r in results),
            f'{(last["peak_mb"] - first["peak_mb"]) / first["peak_mb"]:+.1%}',
        ]
    )
    sizes = [f'peak MiB at {_n(r["rows"])} rows' for r in results]
    return _table(['component', *sizes, 'change'], rows)


_PREPROCESS_PATHS = {
    'materialized': 'Transform materializes from the examples; the ExampleBatcher re-encodes '
    'its output',
    'graph_only': '**Transform analyzes the Parquet copy and writes the graph; the ExampleBatcher '
    'applies it** (the pipeline)',
}


def preprocess(result: Result) -> list[str]:
    rows = []
    for path, label in _PREPROCESS_PATHS.items():
        run = result['paths'][path]
        stages = ('parquet_seconds', 'transform_seconds', 'batcher_seconds', 'seconds')
        rows.append([label] + [f'{run[k]:,.1f} s' if k in run else '–' for k in stages])
    checks = result['records_agree']
    verdicts = []
    for split, check in checks.items():
        verdict = 'bit-equal' if check['exactly_equal'] else 'equal to float32 rounding'
        verdicts.append(
            f'{split} {_n(check["rows"])} rows {verdict if check["equal"] else "**differ**"}'
        )
    return [
        *_table(
            [
                'raw examples to training records',
                "ExampleGen's Parquet copy",
                'Transform',
                'ExampleBatcher',
                'total',
            ],
            rows,
        ),
        '',
        f'{_n(result["rows"])} rows; **{result["materialized_over_graph_only"]:.2f}×**. The two '
        f'sets of records, row by row: {", ".join(verdicts)}.',
    ]


# The Beam stages of ours' pipeline, the ones a distributed runner runs.
BEAM_STAGES = ('CsvExampleGen', 'Transform', 'ExampleBatcher', 'Evaluator')


def _runner_label(result: Result) -> str:
    if result.get('spark_workers'):
        return f'Spark, {result["spark_workers"]} Workers'
    args = ' '.join(result.get('beam_args') or [])
    return 'multi-processing' if 'multi_processing' in args else 'in memory'


def runners(*results: Result) -> list[str]:
    """Ours on the same rows with Beam on each runner: every Beam stage's seconds and peak
    memory per runner, then the whole run."""
    measured = [result['variants']['ours'] for result in results]
    labels = [_runner_label(result) for result in results]
    rows = []
    for name in BEAM_STAGES + ('Trainer',):
        if not all(name in m['component_seconds'] for m in measured):
            continue
        rows.append(
            [name]
            + [f'{m["component_seconds"][name]:,.1f} s' for m in measured]
            + [_n(m['component_peak_mb'].get(name, float('nan'))) for m in measured]
        )
    rows.append(
        ['whole run']
        + [f'**{m["total_seconds"]:,.1f} s**' for m in measured]
        + [_n(m['peak_mb']) for m in measured]
    )
    header = ['stage', *labels, *(f'peak MiB, {label}' for label in labels)]
    return [
        *_table(header, rows),
        '',
        f'{_n(results[0]["rows"])} rows, {results[0]["train_steps"]} training steps, ours only. '
        "Peak MiB: the pipeline's process tree, with the Spark cluster's processes (Master, "
        'Workers, executors, job server, SDK workers) on Spark.',
    ]


def cost_model(in_memory: Result, spark: Result) -> list[str]:
    """Each Beam stage's measured cost per row, and what it predicts for 10^9 rows on N
    one-core workers: seconds = cost per row x rows / N (linear in rows; no fixed costs)."""
    one, cluster = in_memory['variants']['ours'], spark['variants']['ours']
    workers = spark['spark_workers']
    rows = []
    totals = [0.0, 0.0, 0.0]
    for name in BEAM_STAGES:
        if name not in one['component_seconds'] or name not in cluster['component_seconds']:
            continue
        direct_us = one['component_seconds'][name] / in_memory['rows'] * 1e6
        spark_us = cluster['component_seconds'][name] * workers / spark['rows'] * 1e6
        hours = [spark_us * 1e9 / 1e6 / n / 3600 for n in (10, 100, 1000)]
        totals = [t + h for t, h in zip(totals, hours)]
        rows.append([name, f'{direct_us:.1f}', f'{spark_us:.1f}', *(f'{h:,.2f} h' for h in hours)])
    rows.append(['all four', '', '', *(f'**{t:,.2f} h**' for t in totals)])
    header = [
        'stage',
        'µs per row, in memory (1 core)',
        f'core-µs per row, Spark ({workers} Workers)',
        '10^9 rows, 10 workers',
        '100 workers',
        '1,000 workers',
    ]
    return [
        *_table(header, rows),
        '',
        f'Per-row costs measured at {_n(spark["rows"])} rows; the prediction uses the Spark '
        'cost (core-seconds: stage seconds x Workers / rows), which includes the Fn API, the '
        'shuffle and the executors on this machine.',
    ]


def batcher(*results: Result) -> list[str]:
    """The ExampleBatcher's two writers at each size: seconds, CPU seconds and peak memory of the
    process tree, and whether their files were the same bytes."""
    rows = []
    for result in sorted(results, key=lambda r: r['rows']):
        cells = [_n(result['rows']), f'{result["source_mb"]:,.1f}']
        for path in ('one_process', 'beam'):
            measured = result.get(path)
            cells += (
                [
                    f'{measured["seconds"]:,.1f} s',
                    f'{measured["cpu_seconds"]:,.1f} s',
                    _n(measured['peak_rss_mb']),
                ]
                if measured
                else ['–', '–', '–']
            )
        cells.append('yes' if result.get('byte_identical') else 'no')
        rows.append(cells)
    header = [
        'rows',
        'source MB',
        'one process',
        'CPU',
        'peak MiB',
        'Beam DirectRunner',
        'CPU',
        'peak MiB',
        'same bytes',
    ]
    return _table(header, rows)


def recsys(result: Result) -> list[str]:
    """`bench recsys`: per table size and server count, both trainers' examples/s and eval AUC
    against the planted ceiling, bytes per step against the tables' size, the largest server's
    memory, and the checkpoint."""
    rows = []
    for size in result['sizes']:
        for c in size['configs']:
            rows.append(
                [
                    _n(size['table_size']),
                    str(c['num_ps']),
                    _n(c['examples_per_sec']),
                    _n(c['fit']['examples_per_sec']),
                    f'{c["vs_fit"]:.2f}',
                    f'{c["bytes_per_step"] / 1e6:,.2f} / {c["table_bytes"] / 1e6:,.0f}',
                    _n(max(c['ps_rss_bytes']) / 2**20),
                    f'{c["checkpoint_bytes"] / 1e6:,.0f} MB, {c["checkpoint_save_seconds"]:.1f}'
                    f' / {c["checkpoint_restore_seconds"]:.1f} s',
                    f'{c["eval_auc"]:.4f} / {c["fit"]["eval_auc"]:.4f} / {size["ceiling_auc"]:.4f}',
                ]
            )
    header = [
        'table rows',
        'PS',
        'ours ex/s',
        '`model.fit` ex/s',
        'ours / fit',
        'MB per step / MB of tables',
        'PS RSS MiB',
        'checkpoint, save / restore',
        'AUC ours / fit / ceiling',
    ]
    isolated = 'its own network namespace' if result['loopback_isolated'] else 'a shared one'
    return [
        *_table(header, rows),
        '',
        f'Batch {result["batch_size"]}, `steps_per_execution` {result["steps_per_execution"]}, '
        f'best of {result["repeats"]} rounds of {_n(result["steps"])} steps; Adagrad, learning '
        f'rate {result["learning_rate"]}; {_n(result["rows"])} generated rows per size (the last '
        f'of {result["files"]} files held out); `local_processes` cluster, loopback bytes '
        f'counted in {isolated}.',
    ]


def evaluator(result: Result) -> list[str]:
    """The Evaluator against stock TFMA at each size: seconds, peak memory, slices, speedup and
    whether every metric, plot and check agreed."""
    rows = []
    for run in result['runs']:
        rows.append(
            [
                _n(run['rows']),
                _n(run['slices_evaluated']),
                f'{run["stock"]["seconds"]:,.1f} s',
                f'{run["ours"]["seconds"]:,.1f} s',
                f'**{run["speedup"]:.1f}×**',
                _n(run['stock']['peak_rss_mb']),
                _n(run['ours']['peak_rss_mb']),
                'yes' if run['differences'] == 0 else f'**{run["differences"]} differences**',
            ]
        )
    header = [
        'examples',
        'slices',
        'stock TFMA',
        'ours',
        'speedup',
        'stock peak MiB',
        'ours peak MiB',
        'same metrics, plots and checks',
    ]
    return _table(header, rows)


def async_training(result: Result) -> list[str]:
    """`bench async`: per scenario (the remedies' variants aside), our loop's examples/s and
    held-out AUC beside each synchronous reference's, the ratio, and the wall seconds each took to
    the reference's final AUC less 0.005."""
    rows = []
    for name, strategies in result['scenarios'].items():
        if '+' in name:
            continue
        for strategy, figures in strategies.items():
            label = name if strategy == 'ours' else f'{name}, {strategy}'
            if not figures.get('completed', True):
                rows.append([label, 'did not finish', *[''] * 6])
                continue
            compared = result['comparisons'].get(name, {}).get(strategy)
            rows.append(
                [
                    label,
                    _n(figures['examples_per_sec']),
                    _after_first_round(figures['curve']),
                    f'{figures["held_out_auc"]:.4f}',
                    *(_compared(compared, strategy) if compared else [''] * 4),
                ]
            )
    return _table(
        [
            'scenario, strategy',
            'examples/s',
            'examples/s after round 1',
            'held-out AUC (last round)',
            'ours / it, examples/s',
            'target AUC',
            'ours to target, s',
            'it to target, s',
        ],
        rows,
    )


def _compared(compared: dict, strategy: str) -> list[str]:
    to = compared['seconds_to_target']
    return [
        f'{compared["examples_per_sec_ratio"]:.2f}',
        f'{compared["target_auc"]:.4f}',
        _seconds(to['ours']),
        _seconds(to[strategy]),
    ]


def _after_first_round(curve: list) -> str:
    """Examples/s from the end of the first round to the end of the last: the rate once started
    (the first round includes tracing and starting each worker's dataset)."""
    if len(curve) < 2:
        return ''
    first, last = curve[0], curve[-1]
    return _n((last['examples'] - first['examples']) / (last['wall_s'] - first['wall_s']))


def _seconds(value) -> str:
    return 'never' if value is None else f'{value:.1f}'


def async_disruptions(result: Result) -> list[str]:
    """`bench async`: what a lost worker and a cut parameter-server link did to ours and to the
    synchronous references."""
    rows = []
    for name, cost in result.get('disruption_costs', {}).items():
        strategies = result['scenarios'][name]
        ours = strategies['ours']
        events = '; '.join(f'{e["event"]} at {e["training_s"]:.1f} s' for e in ours['disruptions'])
        if 'outcome' in cost:
            rows.append([name, 'ours', events, cost['outcome'].splitlines()[0], '', ''])
        else:
            rows.append(
                [
                    name,
                    'ours',
                    events,
                    'finished',
                    f'{cost["examples_per_sec_ratio"]:.2f} / {cost["from_disruption_ratio"]:.2f}',
                    f'{cost["held_out_auc_minus_equal"]:+.4f}',
                ]
            )
        for strategy, reference in strategies.items():
            lost = reference.get('worker_lost') if strategy != 'ours' else None
            if lost:
                after = lost['first_round_after_kill_s']
                rows.append(
                    [
                        name,
                        strategy,
                        f'worker killed after round {lost["killed_after_rounds"]}',
                        f'{lost["outcome"]}, {lost["seconds_after_kill"]:.0f} s after the kill; '
                        f'first round after it: {_seconds(after)}',
                        '',
                        '',
                    ]
                )
    return _table(
        [
            'scenario',
            'strategy',
            'disruption (training seconds)',
            'outcome',
            'examples/s vs equal: run / from the disruption',
            'AUC vs equal',
        ],
        rows,
    )


def async_remedies(result: Result) -> list[str]:
    """`bench async`: each stale-gradient remedy against its baseline (plain asynchronous
    training on the same hosts), at as many examples."""
    rows = []
    for name, compared in result.get('remedies', {}).items():
        ours = result['scenarios'][name]['ours']
        ratio = compared['link_bytes_per_step_ratio']
        staleness = compared['staleness_mean']
        rows.append(
            [
                name,
                f'{ours["held_out_auc"]:.4f}',
                f'{compared["held_out_auc_minus_baseline"]:+.4f}',
                f'{compared["held_out_loss_minus_baseline"]:+.4f}',
                f'{compared["examples_per_sec_ratio"]:.2f}',
                f'{ratio:.3f}' if ratio else 'n/a',
                f'{staleness["remedy"]:.2f} / {staleness["baseline"]:.2f}',
            ]
        )
    return _table(
        [
            'variant',
            'held-out AUC',
            'AUC vs baseline',
            'loss vs baseline',
            'examples/s vs baseline',
            'link bytes/step vs baseline',
            'staleness mean (it / baseline)',
        ],
        rows,
    )


TABLES: dict[str, Callable[..., list[str]]] = {
    'examplegen': examplegen,
    'transform': transform,
    'transform_vocabularies': transform_vocabularies,
    'input': training_input,
    'input_widths': input_widths,
    'ps': parameter_servers,
    'ps_step': step_comparison,
    'pipeline_components': pipeline_components,
    'pipeline_memory': pipeline_memory,
    'runners': runners,
    'batcher': batcher,
    'cost_model': cost_model,
    'preprocess': preprocess,
    'recsys': recsys,
    'evaluator': evaluator,
    'async_training': async_training,
    'async_disruptions': async_disruptions,
    'async_remedies': async_remedies,
}


def measured_on(results: Sequence[Result], files: Sequence[str]) -> str:
    """When and where: the JSON's `finished_at` and `machine`, when the bench recorded them."""
    sources = ', '.join(f'[{os.path.basename(f)}]({f})' for f in files)
    first = results[0]
    if 'machine' not in first:
        return f'From {sources}.'
    machine = first['machine']
    when = first['finished_at'].replace('T', ' ').replace('Z', ' UTC')
    return (
        f'From {sources}: finished {when}, {machine["cpus"]} CPUs, Python {machine["python"]}, '
        f'{machine["platform"]}.'
    )


def fill(text: str, base_dir: str) -> str:
    """`text` with every marked table rewritten from its JSON files under `base_dir`."""

    def replace(match: re.Match) -> str:
        files = match.group('files').split()
        if match.group('kind') not in TABLES:
            raise ValueError(f'unknown table {match.group("kind")!r}; known: {sorted(TABLES)}')
        results = []
        for name in files:
            with open(os.path.join(base_dir, name), encoding='utf-8') as f:
                results.append(json.load(f))
        lines = TABLES[match.group('kind')](*results) + ['', measured_on(results, files)]
        return match.group(1) + '\n'.join(lines) + '\n' + match.group(5)

    return MARKER.sub(replace, text)
