"""`asynctrain bench batcher`: the ExampleBatcher's two writers of the same files, side by side.

On `--rows` taxi examples (the bundled CSV resampled, train 2/3 and eval 1/3, one GZIP file per
split as a one-worker ExampleGen writes them) and a transform graph analyzed once on a sample,
the ExampleBatcher's executor writes both splits (`transform=True`, the pipeline's way):

- `one_process`: the seeded layout written in the executor's process (shards spilled to disk);
- `beam`: the Beam pipeline (`example_batcher/batching.py`) on the runner of the Beam arguments
  after `--` (DirectRunner in memory by default).

Each path runs in a fresh child process, its wall time measured there and the peak resident set
of its process tree (Beam's workers included) sampled from here. The paths' files must be equal
byte for byte (exit status 1 otherwise). The crossover that the executor's
`ONE_PROCESS_MAX_SOURCE_BYTES` encodes is read off runs at several `--rows`.

    asynctrain bench batcher [--rows N] [--paths one_process,beam] [--output DIR] [-- BEAM_ARGS]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time

from asynctrain.benchmarks import report
from asynctrain.testing import child_runs

DEFAULT_ROWS = 100_000
DEFAULT_OUTPUT = os.path.join('bench_out', 'batcher')
PATHS = ('one_process', 'beam')
# Rows the transform graph is analyzed on (the graph's cost does not grow with --rows).
ANALYZED_ROWS = 20_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        '--rows', type=int, default=DEFAULT_ROWS, help=f'examples (default {DEFAULT_ROWS:,})'
    )
    parser.add_argument(
        '--paths', default=','.join(PATHS), help=f'comma-separated, of {list(PATHS)}'
    )
    parser.add_argument(
        '--output', default=DEFAULT_OUTPUT, help=f'work folder (default {DEFAULT_OUTPUT})'
    )


_log = report.progress('batcher', stderr=True)


def prepare(rows: int, data_dir: str) -> tuple[str, str]:
    """The examples (an Examples URI, Span-1) and a transform graph URI, written once per
    `data_dir`."""
    from asynctrain.testing import transform_runs as runs

    examples_uri = os.path.join(data_dir, 'examples', 'Span-1')
    graph = os.path.join(data_dir, 'analyzed', 'transform_graph')
    if os.path.exists(os.path.join(data_dir, 'done')):
        return examples_uri, graph
    from asynctrain.components.shared import feature_types
    from asynctrain.components.transform import feature_config as fc

    config = fc.load_feature_config(str(runs.TAXI_FEATURES), str(runs.TAXI_SCHEMA))
    table = runs.read_taxi_table(feature_types.load_schema(str(runs.TAXI_SCHEMA)))
    runs.write_span(os.path.join(data_dir, 'examples'), 1, runs.resample_span(table, 1, rows))
    sample = runs.write_span(
        os.path.join(data_dir, 'sample'), 1, runs.resample_span(table, 1, ANALYZED_ROWS)
    )
    runs.run_transform(
        [runs.examples_artifact(sample, 1)],
        runs.schema_artifact(runs.TAXI_SCHEMA, os.path.join(data_dir, 'schema')),
        os.path.join(data_dir, 'analyzed'),
        config,
        disable_analyzer_cache=True,
        disable_statistics=True,
        materialize=False,
    )
    open(os.path.join(data_dir, 'done'), 'w').close()
    return examples_uri, graph


def _write(path: str, examples_uri: str, graph: str, output_dir: str, beam_args, queue) -> None:
    """In a child process: the executor on both splits, by `path`; puts the wall and CPU
    seconds."""
    from tfx.dsl.components.base import base_beam_executor
    from tfx.types import standard_artifacts

    from asynctrain.components.example_batcher import executor, spec
    from asynctrain.components.shared import columnar_records
    from asynctrain.testing import transform_runs as runs

    executor.ONE_PROCESS_MAX_SOURCE_BYTES = 0 if path == 'beam' else None
    graph_artifact = standard_artifacts.TransformGraph()
    graph_artifact.uri = graph
    batched = standard_artifacts.Examples()
    batched.uri = output_dir
    context = base_beam_executor.BaseBeamExecutor.Context(
        beam_pipeline_args=list(beam_args), tmp_dir=output_dir + '.tmp', unique_id='batcher'
    )
    start, cpu_start = time.perf_counter(), time.process_time()
    executor.Executor(context).Do(
        {
            spec.EXAMPLES_KEY: [runs.examples_artifact(examples_uri, 1)],
            spec.TRANSFORM_GRAPH_KEY: [graph_artifact],
        },
        {spec.BATCHED_EXAMPLES_KEY: [batched]},
        {
            spec.EXAMPLES_PER_RECORD_KEY: columnar_records.DEFAULT_EXAMPLES_PER_RECORD,
            spec.NUM_FILES_KEY: columnar_records.DEFAULT_NUM_FILES,
            spec.SEED_KEY: 0,
            spec.TRANSFORM_KEY: 1,
        },
    )
    queue.put((time.perf_counter() - start, time.process_time() - cpu_start))


def _contents(output_dir: str) -> dict[str, bytes]:
    """The bytes of every file of both splits, by path under `output_dir`."""
    files = sorted(glob.glob(os.path.join(output_dir, 'Split-*', '*')))
    return {os.path.relpath(f, output_dir): open(f, 'rb').read() for f in files}


def write_each_path(
    paths: list[str], examples_uri: str, graph: str, output: str, args: argparse.Namespace
) -> tuple[dict, dict] | None:
    """Each path's writing in a child process: its figures and its files' bytes, by path; None
    when a child failed."""
    measured_paths, written = {}, {}
    for path in paths:
        output_dir = os.path.join(output, 'written', f'rows-{args.rows}', path)
        measured = child_runs.run_spawned(
            _write, (path, examples_uri, graph, output_dir, args.beam_args)
        )
        if measured is None:
            _log(f'{path}: the child process failed')
            return None
        (seconds, cpu_seconds), peak_mb = measured
        measured_paths[path] = {
            'seconds': round(seconds, 1),
            # This process's CPU (Beam's multi-process workers not counted): steadier than the
            # wall time on a shared machine.
            'cpu_seconds': round(cpu_seconds, 1),
            'peak_rss_mb': round(peak_mb, 1),
        }
        _log(f'{path}: {measured_paths[path]}')
        written[path] = _contents(output_dir)
    return measured_paths, written


def run(args: argparse.Namespace) -> int:
    """The bench: prepare the data, write it by each path, compare the files, write the result."""
    paths = [p.strip() for p in args.paths.split(',') if p.strip()]
    unknown = sorted(set(paths) - set(PATHS))
    if unknown or not paths:
        print(f'--paths: expected some of {list(PATHS)}, got {args.paths!r}', file=sys.stderr)
        return 2
    output = os.path.abspath(args.output)
    _log(f'preparing {args.rows:,} examples and a transform graph')
    examples_uri, graph = prepare(args.rows, os.path.join(output, 'data', f'rows-{args.rows}'))
    source_mb = sum(
        os.path.getsize(f) for f in glob.glob(os.path.join(examples_uri, '*', '*.gz'))
    ) / (1 << 20)
    result = {
        'benchmark': 'batcher',
        'rows': args.rows,
        'source_mb': round(source_mb, 1),
        'beam_args': list(args.beam_args or []),
    }
    measured = write_each_path(paths, examples_uri, graph, output, args)
    if measured is None:
        return 1
    measured_paths, written = measured
    result.update(measured_paths)
    same = all(files == written[paths[0]] for files in written.values())
    result['byte_identical'] = same
    print(json.dumps(result, indent=2))
    os.makedirs(output, exist_ok=True)
    with open(os.path.join(output, f'result-{args.rows}.json'), 'w') as f:
        json.dump(result, f, indent=2)
    return 0 if same else 1
