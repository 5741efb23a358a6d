"""What `asynctrain bench ps` reports: its result (written as JSON), its chart, its progress line
per config and the summary it prints (see `asynctrain.benchmarks.parameter_server`).
"""

from __future__ import annotations

import argparse
import os
import time

from asynctrain.benchmarks import report, transformed_examples


def layout_name(num_ps: int, partitioner: str) -> str:
    """How the bench names a layout of variables on servers: `1 ps`, `2 ps fixed_shards`."""
    return f'{num_ps} ps' if num_ps == 1 else f'{num_ps} ps {partitioner}'


def config_line(measured: dict) -> str:
    """One config's figures as the progress line says them."""
    return (
        f'{measured["num_workers"]} worker(s), '
        f'{layout_name(measured["num_ps"], measured["partitioner"])} '
        f'({measured["variable_shards"]} shards), spe {measured["steps_per_execution"]}: '
        f'{measured["steps_per_sec"]:.1f} steps/s, '
        f'{measured["examples_per_sec"]:,.0f} examples/s, staleness mean '
        f'{measured["staleness_mean"]:.2f} max {measured["staleness_max"]}, '
        f'input wait {measured["input_wait_fraction"]:.1%}; model.fit '
        f'{measured["fit"]["steps_per_sec"]:.1f} steps/s, ours / fit '
        f'{measured["vs_fit"]:.2f}x; held-out loss ours '
        f'{measured["held_out_loss"]:.4f}, fit '
        f'{measured["fit_held_out_loss"]:.4f}; wall ours '
        f'{measured["wall_seconds"]["ours"]:.1f} s, fit '
        f'{measured["wall_seconds"]["fit"]:.1f} s'
    )


def build_result(
    args: argparse.Namespace,
    transform_output: transformed_examples.TransformOutput | None,
    data: transformed_examples.TransformedExamples,
    configs: list[dict],
    held_out: list,
    load_at_start: list[float],
    started: float,
) -> dict:
    """The result JSON: the run's settings, the data, every config, the machine and its load."""
    from asynctrain.components.trainer import config as config_lib

    return {
        'benchmark': 'ps',
        'steps': args.steps,
        'repeats': args.repeats,
        'batch_size': args.batch_size,
        'examples': data.num_examples,
        # Taxi rows this run transformed, or the earlier Transform output it resampled.
        **transformed_examples.source_fields(transform_output, args.sample_rows),
        'model_hidden_units': list(config_lib.ModelConfig().hidden_units),
        'configs': configs,
        'held_out_batches': len(held_out),
        # 1, 5 and 15-minute load averages: the machine's other work competes for its cores.
        'load_average_start': load_at_start,
        'load_average_end': list(os.getloadavg()),
        'machine': report.machine(),
        'seconds_total': time.monotonic() - started,
        'finished_at': report.finished_at(),
    }


def write_chart(result: dict, path: str) -> None:
    """Steps/s, ours / fit and staleness per cluster shape and steps_per_execution, to `path`."""
    import matplotlib

    matplotlib.use('Agg')
    from matplotlib import pyplot as plt

    configs = result['configs']
    groups = []
    for c in configs:
        key = (c['num_workers'], layout_name(c['num_ps'], c['partitioner']))
        if key not in groups:
            groups.append(key)
    spes = sorted({c['steps_per_execution'] for c in configs})
    figure, (speed, versus, staleness) = plt.subplots(1, 3, figsize=(18, 4.5))
    width = 0.8 / len(spes)
    for i, spe in enumerate(spes):
        rates, fit_rates, ratios, stale = [], [], [], []
        for workers, layout in groups:
            match = [
                c
                for c in configs
                if c['steps_per_execution'] == spe
                and (c['num_workers'], layout_name(c['num_ps'], c['partitioner']))
                == (workers, layout)
            ]
            rates.append(match[0]['steps_per_sec'] if match else 0)
            fit_rates.append(match[0]['fit']['steps_per_sec'] if match else 0)
            ratios.append(match[0]['vs_fit'] if match else 0)
            stale.append(match[0]['staleness_mean'] if match else 0)
        positions = [g + (i - (len(spes) - 1) / 2) * width for g in range(len(groups))]
        speed.bar(positions, rates, width, label=f'steps_per_execution {spe}')
        speed.scatter(positions, fit_rates, marker='_', s=300, color='black', zorder=3)
        versus.bar(positions, ratios, width, label=f'steps_per_execution {spe}')
        staleness.bar(positions, stale, width, label=f'steps_per_execution {spe}')
    labels = [
        f'{w} worker{"s" if w > 1 else ""}\n{layout}'.replace(' fixed_shards', '\nfixed').replace(
            ' min_shard_size', '\nmin size'
        )
        for w, layout in groups
    ]
    versus.axhline(1.0, color='black', linewidth=0.8)
    for axes, title in (
        (speed, f'steps/s (x batch {result["batch_size"]} = examples/s); black: model.fit'),
        (versus, 'ours / model.fit (steps/s)'),
        (staleness, 'mean staleness (updates)'),
    ):
        axes.set_xticks(range(len(groups)))
        axes.set_xticklabels(labels, fontsize=8)
        axes.set_title(title)
        axes.legend(fontsize=8)
    figure.suptitle(
        f'ParameterServerStrategy, in-process cluster on {result["machine"]["cpus"]} '
        f'CPUs, {result["steps"]} timed steps per config'
    )
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def print_summary(configs: list[dict], result_path: str, chart_path: str) -> None:
    """Prints one line per config and the files written."""
    print(
        f'\n{"workers":>7} {"layout":<22}{"spe":>5}{"steps/s":>9}{"examples/s":>12}'
        f'{"stale mean":>11}{"max":>5}{"input wait":>11}{"fit":>8}{"vs fit":>8}'
    )
    for c in configs:
        print(
            f'{c["num_workers"]:>7} {layout_name(c["num_ps"], c["partitioner"]):<22}'
            f'{c["steps_per_execution"]:>5}{c["steps_per_sec"]:>9.1f}'
            f'{c["examples_per_sec"]:>12,.0f}{c["staleness_mean"]:>11.2f}'
            f'{c["staleness_max"]:>5}{c["input_wait_fraction"]:>11.1%}'
            f'{c["fit"]["steps_per_sec"]:>8.1f}{c["vs_fit"]:>7.2f}x'
        )
    print(f'wrote {result_path} and {chart_path}')
