"""What `asynctrain bench input` reports: its result (written as JSON), its chart and the summary
it prints (see `asynctrain.benchmarks.input_pipeline` for what is measured and how to read it).
"""

from __future__ import annotations

import argparse

from asynctrain.benchmarks import report
from asynctrain.benchmarks.input_variants import VARIANTS, BenchData, model_parameters
from asynctrain.benchmarks.transformed_examples import (
    STEPS_PER_EXECUTION,
    TransformOutput,
    source_fields,
)


def build_result(
    args: argparse.Namespace,
    transform_output: TransformOutput | None,
    bench: BenchData,
    variants: dict,
    input_only: dict,
    sweep: dict,
) -> dict:
    """The result JSON: the run's settings, the data, every variant's figures and their ratios."""
    data, batched = bench.data, bench.batched
    return {
        'benchmark': 'input',
        'steps': args.steps,
        'batch_size': args.batch_size,
        'steps_per_execution': STEPS_PER_EXECUTION,
        'model_hidden_units': list(bench.task.config.model.hidden_units),
        'model_parameters': model_parameters(bench.task),
        'data': {
            'examples': data.num_examples,
            'files': data.num_files,
            'bytes': data.bytes,
            # Taxi rows this run transformed, or the earlier Transform output it resampled.
            **source_fields(transform_output, args.sample_rows),
            'generation_seconds': data.seconds,
        },
        # The ExampleBatcher's artifact of the same train split (and of the eval split, whose
        # size and time are included in write_seconds only).
        'batched': {
            'examples_per_record': batched.examples_per_record,
            'records': batched.records,
            'bytes': batched.bytes,
            'bytes_vs_source': batched.bytes / data.bytes,
            'write_seconds': batched.write_seconds,
            'write_examples_per_sec': data.num_examples / batched.write_seconds,
            'same_examples_as_source': bench.same_examples,
        },
        'variants': variants,
        **ratios(variants),
        'input_only_examples_per_sec': input_only,
        'model_sweep': sweep,
        'machine': report.machine(),
        'finished_at': report.finished_at(),
    }


def ratios(variants: dict) -> dict:
    """Ours against tfx and per_example, what the cache adds, and the eval AUC's difference."""
    rate = {name: measured['examples_per_sec'] for name, measured in variants.items()}
    return {
        'ours_vs_tfx': rate['ours'] / rate['tfx'],
        'ours_cached_vs_tfx': rate['ours_cached'] / rate['tfx'],
        'ours_vs_per_example': rate['ours'] / rate['per_example'],
        # What the memory cache still adds over the pre-batched records, after its first epoch.
        'ours_cached_vs_ours': rate['ours_cached'] / rate['ours'],
        'eval_auc_ours_minus_per_example': (
            variants['ours']['eval_auc'] - variants['per_example']['eval_auc']
        ),
    }


def write_chart(result: dict, path: str) -> None:
    """Each variant's examples/s beside the model sweep's, to `path` (PNG)."""
    import matplotlib

    matplotlib.use('Agg')
    from matplotlib import pyplot as plt

    variants = result['variants']
    names = [v for v in VARIANTS if v in variants]
    figure, (bars_axes, sweep_axes) = plt.subplots(1, 2, figsize=(13, 4.5))
    bars = bars_axes.bar(
        names,
        [variants[n]['examples_per_sec'] for n in names],
        color=['#9e9e9e', '#1f77b4', '#2ca02c', '#8c564b', '#ff7f0e', '#d62728'][: len(names)],
    )
    bars_axes.bar_label(
        bars,
        labels=[
            f'{variants[n]["ratio_to_upper_bound"]:.2f}x\nstall {variants[n]["input_stall_fraction"]:.0%}'
            for n in names
        ],
    )
    bars_axes.tick_params(axis='x', labelsize=8)
    bars_axes.set_ylabel('training examples/s')
    bars_axes.set_title(
        f'{result["steps"]} steps of batch {result["batch_size"]}, '
        f'{result["data"]["examples"]:,} examples'
    )
    bars_axes.margins(y=0.25)
    points = result['model_sweep']['points']
    params = [p['parameters'] for p in points]
    sweep_axes.plot(
        params,
        [p['upper_bound_examples_per_sec'] for p in points],
        'o-',
        color='#9e9e9e',
        label='upper bound (in memory)',
    )
    sweep_axes.plot(
        params, [p['ours_examples_per_sec'] for p in points], 'o-', color='#1f77b4', label='ours'
    )
    sweep_axes.axhline(
        result['input_only_examples_per_sec']['ours'],
        color='#1f77b4',
        linestyle=':',
        label='our input alone',
    )
    sweep_axes.set_xscale('log')
    sweep_axes.set_yscale('log')
    sweep_axes.set_xlabel('model parameters')
    sweep_axes.set_ylabel('examples/s')
    sweep_axes.set_title('small (input-bound) to large (compute-bound)')
    sweep_axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def print_summary(result: dict, result_path: str, chart_path: str) -> None:
    """Prints every variant's rate, stall and ratio, the headline ratios and the files written."""
    variants = result['variants']
    print(f'\n{"pipeline":<14}{"examples/s":>12}{"vs upper":>10}{"input stall":>13}')
    for name in VARIANTS:
        measured = variants[name]
        print(
            f'{name:<14}{measured["examples_per_sec"]:>12,.0f}'
            f'{measured["ratio_to_upper_bound"]:>10.2f}{measured["input_stall_fraction"]:>13.1%}'
        )
    print(
        f'ours_cached after its first epoch '
        f'({variants["ours_cached"]["first_epoch_examples_per_sec"]:,.0f} examples/s): '
        f'{variants["ours_cached"]["ratio_to_upper_bound"]:.2f} of the upper bound'
    )
    print(
        f'ours / tfx = {result["ours_vs_tfx"]:.2f}; ours / per_example = '
        f'{result["ours_vs_per_example"]:.2f}; eval AUC ours - per_example = '
        f'{result["eval_auc_ours_minus_per_example"]:+.4f}; first width with our stall under '
        f'5%: {result["model_sweep"]["first_width_with_stall_under_5pct"]}'
    )
    batched = result['batched']
    print(
        f'pre-batched: {batched["bytes_vs_source"]:.2f}x the source bytes, written at '
        f'{batched["write_examples_per_sec"]:,.0f} examples/s'
    )
    print(f'wrote {result_path} and {chart_path}')
