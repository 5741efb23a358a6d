"""`asynctrain bench recsys`: a recommender's embedding tables on parameter servers, by table
size and number of servers.

For each table size (the vocabulary of the generator's largest columns, `--sizes`; the 26
categorical columns' vocabularies are log-spaced up to it, four of them at it) the bench
generates a Criteo-like dataset with a planted signal (`recsys_data`), maps each column through
a vocabulary of its train values into a table of its vocabulary's size plus one OOV row
(`recsys_examples`), and for each number of parameter servers
(`--num-ps`) starts a `local_processes` cluster (each worker and server its own process on
127.0.0.1) and trains the built-in model (an 8-wide embedding per column; the default
partitioner splits each table of at least 2 x 256 KiB over every server) with:

- our loop (`loop.Trainer`) and Keras `model.fit` under the same ParameterServerStrategy, on the
  same cluster, data, model, optimizer and `steps_per_execution` (`parameter_server_fit`), in
  `--repeats` timed rounds of `--steps` steps, alternating; each variant's best round gives its
  examples/s, and `vs_fit` is ours / fit;
- bytes moved per step: loopback bytes received during each timed round / its steps
  (`recsys_examples.loopback_bytes`), beside `table_bytes`, what one step would move if the
  tables travelled whole. Exact when the bench runs in a network namespace of its own
  (`loopback_isolated` in the result), as the command below does;
- parameter-server memory: each server's resident memory (VmRSS) once our model is built and
  warmed up, before `model.fit` builds its own copy beside it (`ps_rss_bytes`), and the bytes of
  the variables each server holds (`variable_bytes_per_ps`, from `placement`);
- checkpoint: size on disk, the time of the run's first save (which includes tracing the save
  function, as a training run's first checkpoint does) and of restoring it into the running
  model;
- quality: eval AUC of both trained models (a plain copy of each, on the held-out last file)
  against the generator's planted ceiling on that file.

Both variants train in the same server processes, so the memory of the second one built is not
measured separately; a run on one machine shares its cores between every server, the worker and
the coordinator (there is no GPU here: figures are CPU only).

    unshare -n sh -c 'ip link set lo up && asynctrain bench recsys [--sizes N ...] [--num-ps N ...]
        [--rows N] [--steps N] [--repeats N] [--batch-size N] [--output DIR]'
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import sys
import tempfile
import time

from asynctrain.benchmarks import recsys_data, recsys_examples, report

DEFAULT_OUTPUT = os.path.join('bench_out', 'recsys')
DEFAULT_SIZES = (10_000, 100_000, 1_000_000, 10_000_000)
DEFAULT_NUM_PS = (1, 2, 4)
DEFAULT_ROWS = 1_000_000
DEFAULT_FILES = 5
DEFAULT_STEPS = 800
DEFAULT_REPEATS = 2
DEFAULT_STEPS_PER_EXECUTION = 10
BATCH_SIZE = 1024
DEFAULT_LEARNING_RATE = 0.2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    def integers(name, default, text):
        parser.add_argument(
            name, type=int, nargs='+', default=list(default), metavar='N', help=text
        )

    def integer(name, default, text):
        parser.add_argument(name, type=int, default=default, help=f'{text} (default {default})')

    integers('--sizes', DEFAULT_SIZES, "table sizes: the largest columns' vocabulary")
    integers('--num-ps', DEFAULT_NUM_PS, 'parameter-server counts')
    integer('--rows', DEFAULT_ROWS, 'generated rows per size, the last file held out for eval')
    integer('--files', DEFAULT_FILES, 'generated files per size')
    integer('--steps', DEFAULT_STEPS, 'timed steps per round')
    integer('--repeats', DEFAULT_REPEATS, 'timed rounds per variant, ours and fit alternating')
    integer('--steps-per-execution', DEFAULT_STEPS_PER_EXECUTION, 'steps per closure')
    integer('--batch-size', BATCH_SIZE, 'examples per step')
    integer('--workers', 1, 'workers')
    integer('--seed', 0, "the generator's seed")
    parser.add_argument(
        '--learning-rate',
        type=float,
        default=DEFAULT_LEARNING_RATE,
        help=f"Adagrad's, for both trainers (default {DEFAULT_LEARNING_RATE})",
    )
    parser.add_argument(
        '--output',
        default=DEFAULT_OUTPUT,
        help=f'directory for result.json and recsys.png (default {DEFAULT_OUTPUT}); emptied first',
    )


_log = report.progress('recsys')


def _trainer_config(args: argparse.Namespace, num_ps: int, train_steps: int):
    from asynctrain.components.trainer import config as config_lib

    return config_lib.TrainerConfig(
        training=config_lib.TrainingConfig(
            train_steps=train_steps,
            batch_size=args.batch_size,
            steps_per_execution=args.steps_per_execution,
            checkpoint_interval_steps=0,
            summary_interval_steps=1 << 30,
            max_checkpoints_to_keep=1,
            learning_rate=args.learning_rate,
        ),
        distribution=config_lib.DistributionConfig(
            cluster='local_processes', num_workers=args.workers, num_ps=num_ps
        ),
    )


def _checkpoint_figures(trainer) -> dict:
    """Saves a checkpoint, then restores it into the running model: size and both times."""
    started = time.perf_counter()
    path = trainer.checkpoint_manager.save(
        checkpoint_number=int(trainer.optimizer.iterations.numpy()), check_interval=False
    )
    saved = time.perf_counter() - started
    size = sum(os.path.getsize(f) for f in glob.glob(path + '.*'))
    started = time.perf_counter()
    trainer.checkpoint.read(path).assert_consumed()
    return {
        'checkpoint_bytes': size,
        'checkpoint_save_seconds': saved,
        'checkpoint_restore_seconds': time.perf_counter() - started,
    }


def run_config(
    examples: recsys_examples.RecsysExamples, num_ps: int, args: argparse.Namespace, run_dir: str
) -> dict:
    """Both variants on a fresh `local_processes` cluster with `num_ps` servers."""
    from asynctrain.benchmarks import parameter_server_fit as fit_lib
    from asynctrain.components.trainer.cluster import servers as cluster_lib
    from asynctrain.components.trainer.training import loop, placement, task, tasks

    warm = args.steps_per_execution * args.workers
    config = _trainer_config(args, num_ps, warm)
    schema = task.TransformedSchema(
        feature_spec=examples.feature_spec(),
        categorical_rows=examples.table_rows,
        label_key=recsys_examples.LABEL,
    )
    recsys_task = tasks.BinaryClassificationTask(schema, config)
    with cluster_lib.start(config.distribution) as cluster:
        trainer = loop.Trainer(recsys_task, cluster, examples.examples_dir, run_dir)
        fit_lib.train_to(trainer, warm, save=False)
        placed = placement.report(trainer.model, trainer.optimizer)
        servers = sorted((i, p.pid) for (job, i), p in cluster.processes.items() if job == 'ps')
        ps_rss = [recsys_examples.rss_bytes(pid) for _, pid in servers]
        keras_model, creator = fit_lib.prepare_fit(
            recsys_task, cluster, examples.examples_dir, warm
        )
        ours, fit = alternate_rounds(trainer, keras_model, creator, warm, args)
        ps_rss_both = [recsys_examples.rss_bytes(pid) for _, pid in servers]
        checkpoint = _checkpoint_figures(trainer)
        aucs = _evaluate_both(recsys_task, trainer, keras_model, examples.examples_dir)
    return {
        'num_ps': num_ps,
        'num_workers': args.workers,
        **best_rounds(ours, fit, *aucs),
        **table_figures(placed),
        'ps_rss_bytes': ps_rss,
        'ps_rss_bytes_with_fit_model': ps_rss_both,
        **checkpoint,
    }


def alternate_rounds(
    trainer, keras_model, creator, warm: int, args: argparse.Namespace
) -> tuple[list[dict], list[dict]]:
    """`--repeats` timed rounds of ours and of fit, alternating, each with its bytes per step."""
    from asynctrain.benchmarks import parameter_server_fit as fit_lib

    ours, fit = [], []
    for i in range(args.repeats):
        before = recsys_examples.loopback_bytes()
        measured = fit_lib.train_to(trainer, warm + (i + 1) * args.steps, save=False)
        measured['bytes_per_step'] = (recsys_examples.loopback_bytes() - before) / measured[
            'steps_this_run'
        ]
        measured['steps_per_sec'] = measured['steps_this_run'] / measured['seconds']
        ours.append(measured)
        before = recsys_examples.loopback_bytes()
        measured = fit_lib.timed_fit(keras_model, creator, args.steps, args.batch_size)
        measured['bytes_per_step'] = (recsys_examples.loopback_bytes() - before) / args.steps
        fit.append(measured)
    return ours, fit


def _evaluate_both(recsys_task, trainer, keras_model, examples_dir: str) -> tuple[dict, dict]:
    """Eval loss and AUC of our trained model and of a plain copy of fit's."""
    from asynctrain.components.trainer.training import checkpoints, evaluation

    ours_auc = evaluation.evaluate(recsys_task, trainer.serving_model(), examples_dir)
    plain = recsys_task.build_model()
    with tempfile.TemporaryDirectory() as scratch:
        checkpoints.transfer_weights(keras_model, plain, scratch)
    return ours_auc, evaluation.evaluate(recsys_task, plain, examples_dir)


def best_rounds(ours: list[dict], fit: list[dict], ours_auc: dict, fit_auc: dict) -> dict:
    """Each variant's best round and eval figures, ours / fit, and every round's examples/s."""
    best = max(ours, key=lambda r: r['steps_per_sec'])
    best_fit = max(fit, key=lambda r: r['steps_per_sec'])
    return {
        'examples_per_sec': best['examples_per_sec'],
        'steps_per_sec': best['steps_per_sec'],
        'bytes_per_step': best['bytes_per_step'],
        'eval_auc': ours_auc['auc'],
        'eval_loss': ours_auc['loss'],
        'fit': {
            'examples_per_sec': best_fit['examples_per_sec'],
            'steps_per_sec': best_fit['steps_per_sec'],
            'bytes_per_step': best_fit['bytes_per_step'],
            'eval_auc': fit_auc['auc'],
            'eval_loss': fit_auc['loss'],
        },
        'vs_fit': best['steps_per_sec'] / best_fit['steps_per_sec'],
        'rounds_examples_per_sec': {
            'ours': [r['examples_per_sec'] for r in ours],
            'fit': [r['examples_per_sec'] for r in fit],
        },
    }


def table_figures(placed: dict) -> dict:
    """The embedding tables' bytes and shards, and the variables' bytes on each server."""
    tables = [p for p in placed['model'] if '_embedding/' in p['name']]
    return {
        'table_bytes': sum(s['nbytes'] for t in tables for s in t['shards']),
        'largest_table_shards': max((len(t['shards']) for t in tables), default=0),
        'largest_shard_rows': max((s['rows'] for t in tables for s in t['shards']), default=0),
        'variable_bytes_per_ps': placed['bytes_per_task'],
    }


def write_chart(result: dict, path: str) -> None:
    """Examples/s, bytes per step, server memory and AUC by table size, a line per server count."""
    import matplotlib

    matplotlib.use('Agg')
    from matplotlib import pyplot as plt

    sizes = [s['table_size'] for s in result['sizes']]
    counts = sorted({c['num_ps'] for s in result['sizes'] for c in s['configs']})
    figure, axes = plt.subplots(1, 4, figsize=(22, 4.5))
    speed, traffic, memory, quality = axes
    for num_ps in counts:
        _plot_server_count(axes, result, num_ps)
    traffic.plot(
        sizes,
        [s['configs'][0]['table_bytes'] / 1e6 for s in result['sizes']],
        'k:',
        label='all tables (one whole copy)',
    )
    quality.plot(sizes, [s['ceiling_auc'] for s in result['sizes']], 'k:', label='planted ceiling')
    for ax, title in (
        (speed, f'examples/s (batch {result["batch_size"]}); dashed: model.fit'),
        (traffic, 'MB over loopback per step'),
        (memory, 'largest PS resident memory, GiB (ours only)'),
        (quality, 'eval AUC'),
    ):
        ax.set_xscale('log')
        ax.set_xlabel('table size (rows of the largest tables)')
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=7)
    traffic.set_yscale('log')
    figure.suptitle(
        f'Embedding tables on parameter servers, local processes on {result["machine"]["cpus"]} '
        f'CPUs (no GPU)'
    )
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _plot_server_count(axes, result: dict, num_ps: int) -> None:
    """One server count's line on each of the chart's four panels, by table size."""
    speed, traffic, memory, quality = axes
    rows = [
        (s['table_size'], c) for s in result['sizes'] for c in s['configs'] if c['num_ps'] == num_ps
    ]
    x = [size for size, _ in rows]
    line = speed.plot(x, [c['examples_per_sec'] for _, c in rows], 'o-', label=f'ours, {num_ps} ps')
    color = line[0].get_color()
    speed.plot(
        x,
        [c['fit']['examples_per_sec'] for _, c in rows],
        'x--',
        color=color,
        label=f'fit, {num_ps} ps',
    )
    traffic.plot(
        x,
        [c['bytes_per_step'] / 1e6 for _, c in rows],
        'o-',
        color=color,
        label=f'ours, {num_ps} ps',
    )
    memory.plot(
        x,
        [max(c['ps_rss_bytes']) / 2**30 for _, c in rows],
        'o-',
        color=color,
        label=f'{num_ps} ps',
    )
    quality.plot(x, [c['eval_auc'] for _, c in rows], 'o-', color=color, label=f'ours, {num_ps} ps')


def _write(output: str, args: argparse.Namespace, results: list, started: float, load) -> tuple:
    """Writes the result so far (after each size, so a size that fails keeps the others)."""
    result = {
        'benchmark': 'recsys',
        'rows': args.rows,
        'files': args.files,
        'seed': args.seed,
        'steps': args.steps,
        'repeats': args.repeats,
        'steps_per_execution': args.steps_per_execution,
        'batch_size': args.batch_size,
        'learning_rate': args.learning_rate,
        'cluster': 'local_processes',
        'loopback_isolated': recsys_examples.loopback_isolated(),
        'sizes': results,
        'load_average_start': load,
        'load_average_end': list(os.getloadavg()),
        'machine': report.machine(),
        'seconds_total': time.monotonic() - started,
        'finished_at': report.finished_at(),
    }
    return report.write_result(output, result, 'recsys.png', write_chart)


def run_size(size: int, args: argparse.Namespace, output: str) -> dict:
    """One table size: its generated examples, then every server count's config, each logged."""
    data = recsys_data.RecsysData(
        rows=args.rows, files=args.files, seed=args.seed, vocabulary_size=size
    )
    data_started = time.monotonic()
    examples = recsys_examples.make_examples(data, os.path.join(output, 'data', str(size)))
    _log(
        f'size {size:,}: {examples.train_rows:,} train and {examples.eval_rows:,} eval '
        f'examples in {time.monotonic() - data_started:.0f} s; ceiling AUC '
        f'{examples.ceiling_auc:.4f}; {sum(examples.table_rows.values()):,} table rows'
    )
    configs = []
    for num_ps in args.num_ps:
        run_dir = os.path.join(output, 'runs', f'{size}-{num_ps}ps')
        measured = run_config(examples, num_ps, args, run_dir)
        shutil.rmtree(run_dir, ignore_errors=True)
        configs.append(measured)
        _log(config_line(size, num_ps, measured, examples.ceiling_auc))
    shutil.rmtree(os.path.join(output, 'data', str(size)), ignore_errors=True)
    return {
        'table_size': size,
        'table_rows': sum(examples.table_rows.values()),
        'train_examples': examples.train_rows,
        'eval_examples': examples.eval_rows,
        'ceiling_auc': examples.ceiling_auc,
        'configs': configs,
    }


def config_line(size: int, num_ps: int, measured: dict, ceiling_auc: float) -> str:
    """One config's figures as the progress line says them."""
    return (
        f'size {size:,}, {num_ps} ps: ours {measured["examples_per_sec"]:,.0f} ex/s, '
        f'fit {measured["fit"]["examples_per_sec"]:,.0f} ex/s ({measured["vs_fit"]:.2f}x); '
        f'{measured["bytes_per_step"] / 1e6:.2f} MB/step (tables '
        f'{measured["table_bytes"] / 1e6:.0f} MB); PS RSS '
        f'{max(measured["ps_rss_bytes"]) / 2**20:,.0f} MiB; checkpoint '
        f'{measured["checkpoint_bytes"] / 1e6:.0f} MB saved in '
        f'{measured["checkpoint_save_seconds"]:.1f} s, restored in '
        f'{measured["checkpoint_restore_seconds"]:.1f} s; AUC ours '
        f'{measured["eval_auc"]:.4f}, fit {measured["fit"]["eval_auc"]:.4f}, ceiling '
        f'{ceiling_auc:.4f}'
    )


def run(args: argparse.Namespace) -> int:
    """The bench: every table size in turn, the result rewritten after each; then the paths."""
    numbers = [*args.sizes, *args.num_ps, args.rows, args.steps, args.repeats, args.batch_size]
    if min([*numbers, args.steps_per_execution, args.workers]) < 1 or args.files < 2:
        print(
            '--sizes, --num-ps, --rows, --steps, --repeats, --batch-size, --steps-per-execution, '
            '--workers: positive integers; --files: at least 2 (the last is the eval split)',
            file=sys.stderr,
        )
        return 2
    output = os.path.abspath(args.output)
    shutil.rmtree(output, ignore_errors=True)
    os.makedirs(output)
    started = time.monotonic()
    load_at_start = list(os.getloadavg())
    results = []
    for size in args.sizes:
        results.append(run_size(size, args, output))
        result_path, chart_path = _write(output, args, results, started, load_at_start)
    shutil.rmtree(os.path.join(output, 'data'), ignore_errors=True)
    shutil.rmtree(os.path.join(output, 'runs'), ignore_errors=True)
    print(f'wrote {result_path} and {chart_path}')
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog='bench recsys', description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args())


if __name__ == '__main__':
    sys.exit(main())
