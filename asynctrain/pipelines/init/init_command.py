"""`asynctrain init`: from a CSV directory and a target column to reviewed pipeline files.

    asynctrain init --data DIR --label COLUMN --output SPEC_DIR
                    [--task auto|binary|multiclass|regression] [--delimiter C]
                    [--null-marker S ...] [--positive VALUE] [--max-rows N]
    asynctrain run --config /abs/SPEC_DIR/config.yaml --work-dir /abs/runs/local

It reads the CSV files of DIR with ExampleGen's own reader (all of a small input; of a large one,
`--max-rows` rows from byte ranges spread over every file), finds the usual missing-value markers
(`NA`, `null`, ...) in columns otherwise of numbers or dates unless `--null-marker` names them,
infers the schema with TFDV, proposes the task, one transform
per column, the evaluation threshold and the slices to evaluate, writes `schema.pbtxt`, `features.yaml` and
`config.yaml` into SPEC_DIR (anywhere), and prints what it decided and the next command, with
absolute paths so that it does the same from any folder. The pipeline is named after the data
and the label (`review_files.pipeline_name`), so two datasets run in one work directory keep
their state apart. DIR may
hold compressed files (`.gz`, `.bz2`, ...), read as ExampleGen reads them. As for `asynctrain
run`, TensorFlow's and the other libraries' output goes to a log file (under the system's
temporary directory, `asynctrain/logs/init-*.log`), not to the console, unless `--verbose`.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import sys
import tempfile

from asynctrain.components.shared.yaml_config import ConfigError

TASKS = ('auto', 'binary', 'multiclass', 'regression')


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--data', metavar='DIR', required=True, help='directory of CSV files')
    parser.add_argument('--label', metavar='COLUMN', required=True, help='the target column')
    parser.add_argument(
        '--output', metavar='SPEC_DIR', required=True, help='where the three files are written'
    )
    parser.add_argument('--task', choices=TASKS, default='auto', help='default: auto')
    parser.add_argument('--delimiter', default=',', help="one character (default: ',')")
    parser.add_argument(
        '--null-marker',
        action='append',
        default=[],
        metavar='S',
        help='a cell text meaning "missing" besides the empty cell (repeatable, e.g. NA)',
    )
    parser.add_argument('--positive', default=None, help='binary: the positive class value')
    parser.add_argument(
        '--max-rows', type=int, default=None, help='rows sampled from a large input (100,000)'
    )
    parser.add_argument(
        '--verbose',
        action='store_true',
        help="show TensorFlow's and TFDV's output on the console too (it always goes to the log "
        'file)',
    )


def run(args: argparse.Namespace) -> int:
    from asynctrain.components.shared import console

    # TensorFlow's import-time lines (TFDV infers the schema) and every other library's go to a
    # log file, as for `asynctrain run`; the console shows init's own lines.
    log_path = console.new_log_path(os.path.join(tempfile.gettempdir(), 'asynctrain'), 'init')
    with console.quiet(log_path, getattr(args, 'verbose', False)):
        code, output = _init(args)
    print(output, file=sys.stderr if code else sys.stdout)
    return code


def _init(args: argparse.Namespace) -> tuple[int, str]:
    """(exit code, what to print: the decisions, or the error)."""
    from asynctrain.components.example_gen import csv_dialect, csv_sample
    from asynctrain.pipelines.config import PipelineConfig
    from asynctrain.pipelines.init import (
        column_warnings,
        drift_draft,
        log_scale,
        null_markers,
        pipeline_draft,
        review_files,
        slice_draft,
        training_draft,
    )

    try:
        dialect = csv_dialect.CsvDialect(
            delimiter=args.delimiter, null_markers=tuple(args.null_marker)
        )
    except ValueError as e:
        return 2, f'asynctrain init: --delimiter: {e}'
    try:
        files = csv_sample.input_files(args.data)
        text = csv_sample.read_text(files, dialect, args.max_rows or csv_sample.DEFAULT_MAX_ROWS)
        markers = null_markers.plan_markers(text, dialect.null_markers)
        sample = csv_sample.typed(text, markers.markers)
        mixed = {column.name: column for column in markers.mixed}
        if args.label in mixed and args.task == 'auto':
            raise ConfigError(
                f'--label: {mixed[args.label].describe()}, or name the task with --task'
            )
        task = pipeline_draft.plan_task(sample, args.label, args.task, args.positive)
        columns = [
            dataclasses.replace(
                plan, reason=f'{plan.reason}; WARNING: {mixed[plan.name].describe()}'
            )
            if plan.name in mixed
            else plan
            for plan in (
                column_warnings.with_warnings(sample, log_scale.with_log_scale(sample, plan))
                for plan in pipeline_draft.plan_columns(sample, args.label)
            )
        ]
        threshold = pipeline_draft.plan_threshold(sample, task)
        training = training_draft.plan_training(
            sample, task.task, long_tail=bool(task.skew and task.skew.long_tail)
        )
        bad_rows = pipeline_draft.plan_bad_rows(sample, args.label)
    except ConfigError as e:
        return 2, f'asynctrain init: {e}'
    if not any(plan.transform for plan in columns):
        return 2, 'asynctrain init: no column is usable as a feature'
    os.makedirs(args.output, exist_ok=True)
    # Absolute: the printed command runs from any folder.
    paths = {
        name: os.path.join(os.path.abspath(args.output), name)
        for name in (review_files.SCHEMA_FILE, review_files.FEATURES_FILE, review_files.CONFIG_FILE)
    }
    schema = review_files.infer_schema(sample)
    review_files.write_schema(paths[review_files.SCHEMA_FILE], schema, sample)
    drift = drift_draft.plan_drift(sample, schema, task.column)
    review_files.write_features(paths[review_files.FEATURES_FILE], task, columns)
    slices = slice_draft.plan_slices(sample, columns, threshold, task)
    name = review_files.pipeline_name(files, args.data, task.column)
    review_files.write_config(
        paths[review_files.CONFIG_FILE],
        name,
        args.output,
        args.data,
        args.delimiter,
        markers,
        task,
        threshold,
        training,
        bad_rows,
        drift,
        slices,
    )
    # `asynctrain run`'s default work directory, made absolute.
    work_dir = os.path.abspath(PipelineConfig.work_dir)
    run = RunPlan(name, paths[review_files.CONFIG_FILE], work_dir)
    return 0, describe(
        sample, markers, task, columns, threshold, training, bad_rows, drift, slices, paths, run
    )


@dataclasses.dataclass(frozen=True)
class RunPlan:
    """The run init proposes: the pipeline's name, its config and the work directory, all
    absolute, so that the printed command does the same from any folder.

    Attributes:
      pipeline_name: The name init gave the pipeline (`review_files.pipeline_name`).
      config_path: The config.yaml init wrote.
      work_dir: The work directory: `./runs/local` of the folder init ran in.
    """

    pipeline_name: str
    config_path: str
    work_dir: str

    def command(self) -> str:
        config, work_dir = shlex.quote(self.config_path), shlex.quote(self.work_dir)
        return f'asynctrain run --config {config} --work-dir {work_dir}'

    @property
    def state_dir(self) -> str:
        from asynctrain.pipelines import work_dir_layout

        return work_dir_layout.state_dir(self.work_dir, self.pipeline_name)


def describe(
    sample,
    markers,
    task,
    columns,
    threshold,
    training,
    bad_rows,
    drift,
    slices,
    paths: dict,
    run: RunPlan,
) -> str:
    """What init decided, as printed."""
    from asynctrain.pipelines.init import slice_draft, wording

    if sample.complete:
        how = f'all rows of {len(sample.files)} file(s)'
    else:
        how = (
            f'a sample of {sample.rows:,} rows of {len(sample.files)} file(s), from '
            f'{sample.chunks} byte ranges spread over all of them'
        )
    lines = [
        f'asynctrain init: read {how}'
        + (f' ({wording.rows(sample.rejected)} unreadable, skipped)' if sample.rejected else ''),
        f'  missing values: {", ".join(map(repr, markers.markers)) or "empty cells"} '
        f'({markers.reason})',
        *(f'  WARNING: {column.describe()}' for column in markers.mixed),
        f'  label {task.column!r}: {task.task} ({task.reason})',
    ]
    if task.skew is not None:
        lines.append(f'  label distribution: {task.skew.reason}')
    if task.classes:
        lines.append(
            '  classes: ' + ', '.join(f'{value!r} {count}' for value, count in task.classes[:10])
        )
    width = max(len(plan.name) for plan in columns)
    for plan in columns:
        lines.append(f'  {plan.name:<{width}}  {plan.transform or "-":<10}  {plan.reason}')
    lines.append(f'  training: {training.reason}')
    lines.append(f'  evaluation: {threshold.reason}')
    lines.append(f'  {slice_draft.describe(slices)}')
    lines.append(f'  bad rows: max_bad_fraction {bad_rows.max_bad_fraction}: {bad_rows.reason}')
    thresholds = ', '.join(f'{name} {value}' for name, (value, _) in drift.features.items())
    lines.append(f'  drift: {thresholds or "the default thresholds"} ({drift.reason})')
    lines.append(
        f'  pipeline: {run.pipeline_name!r} (named after the data and the label; its state: '
        f'{run.state_dir})'
    )
    lines.append('wrote ' + ', '.join(paths.values()))
    lines.append('review them, then run (from any folder):')
    lines.append(f'  {run.command()}')
    return '\n'.join(lines)
