"""The files `asynctrain init` writes for review: `schema.pbtxt`, `features.yaml`, `config.yaml`.

The schema is TFDV's inference from statistics of the sample; the other two are written as text
so that every decision carries its reason as a comment on its line.
"""

from __future__ import annotations

import json
import os
import re

from tensorflow_metadata.proto.v0 import schema_pb2

from asynctrain.components.example_gen.csv_sample import CsvSample
from asynctrain.pipelines.init import sample_statistics, slice_draft
from asynctrain.pipelines.init.drift_draft import DriftPlan
from asynctrain.pipelines.init.null_markers import MarkerPlan
from asynctrain.pipelines.init.pipeline_draft import (
    BadRowsPlan,
    ColumnPlan,
    TaskPlan,
    ThresholdPlan,
)
from asynctrain.pipelines.init.training_draft import TrainingPlan

SCHEMA_FILE = 'schema.pbtxt'
FEATURES_FILE = 'features.yaml'
CONFIG_FILE = 'config.yaml'
# What a data file's name ends with, left out of the pipeline's name.
_DATA_SUFFIXES = (
    '.csv',
    '.tsv',
    '.txt',
    '.gz',
    '.bz2',
    '.xz',
    '.zst',
    '.zip',
    '.deflate',
    '.snappy',
)
# TFX's limit on a pipeline's name (`tfx.orchestration.pipeline`).
_MAX_PIPELINE_NAME = 63


def pipeline_name(files: list[str], data_dir: str, label: str) -> str:
    """`<data>-<label>`, in TFX's rules for a pipeline name: the one input file's name without
    its suffixes (`penguins_raw.csv.gz`: `penguins_raw`), or the data folder's name when there
    are several, then the label; lowercase letters, digits and `-` (the pattern Kubeflow's
    compiler requires, `[a-z0-9][a-z0-9-]*`), at most 63 characters. Two datasets, or two labels
    of one, get two names, hence two folders of state in one work directory."""
    if len(files) == 1:
        stem = os.path.basename(files[0])
        while stem.lower().endswith(_DATA_SUFFIXES):
            stem = stem[: stem.rindex('.')]
    else:
        stem = os.path.basename(os.path.abspath(data_dir))
    name = re.sub(r'[^a-z0-9]+', '-', f'{stem}-{label}'.lower()).strip('-')
    return name[:_MAX_PIPELINE_NAME].rstrip('-') or 'dataset'


def infer_schema(sample: CsvSample) -> schema_pb2.Schema:
    """TFDV's schema of the sample: types, presence and value counts per column, no domains
    (a value unseen in the sample is not an anomaly; the vocabulary handles it)."""
    import tensorflow_data_validation as tfdv

    statistics = sample_statistics.statistics(sample, sample.names)
    return tfdv.infer_schema(statistics, infer_feature_shape=False, max_string_domain_size=0)


def write_schema(path: str, schema: schema_pb2.Schema, sample: CsvSample) -> None:
    from google.protobuf import text_format

    how = 'all' if sample.complete else f'a sample of {sample.rows:,}'
    header = (
        '# proto-file: tensorflow_metadata/proto/v0/schema.proto\n'
        '# proto-message: tensorflow.metadata.v0.Schema\n'
        '#\n'
        f'# Inferred by TFDV from {how} rows of {len(sample.files)} file(s) by `asynctrain init`.\n'
        '# Review it: a feature may be missing in a row (an empty cell or a null marker) unless\n'
        '# presence.min_fraction is 1.0; the type decides how ExampleGen parses each column.\n\n'
    )
    with open(path, 'w', encoding='utf-8') as f:
        f.write(header + text_format.MessageToString(schema))


def _yaml_scalar(value) -> str:
    # JSON strings are valid YAML scalars and quote what YAML would misread ('NA', 'yes', '1').
    return json.dumps(value)


def write_features(path: str, task: TaskPlan, columns: list[ColumnPlan]) -> None:
    lines = [
        '# Draft preprocessing by `asynctrain init`: one transform per column, with why.',
        '# Review each line; remove a feature to leave it out, change a transform to override.',
        '#   zscore      numeric -> (x - mean) / std over the train split; missing -> fill;',
        '#               with log: true, of log(1 + x) (for a long right tail of values >= 0)',
        '#   vocabulary  few distinct strings or ints -> id in the top_k most frequent values',
        '#   hash        very many distinct strings -> one of num_buckets hashed ids',
        '#   datetime    dates, times or epoch instants -> calendar parts (<name>_year, _month, ...)',
        'label:',
        f'  column: {_yaml_scalar(task.column)}',
        f'  task: {task.task}  # {task.reason}',
    ]
    if task.positive is not None:
        lines.append(f'  positive: {_yaml_scalar(task.positive)}')
    if task.skew is not None:
        lines.append(f'  # {task.skew.reason}')
    if task.classes:
        counts = ', '.join(f'{value}: {count}' for value, count in task.classes[:10])
        lines.append(f'  # classes in the sample: {counts}')
    lines.append('features:')
    for plan in columns:
        if plan.transform is None:
            lines.append(f'  # {_yaml_scalar(plan.name)}: {plan.reason}')
            continue
        fields = {'name': plan.name, 'transform': plan.transform, **plan.options}
        body = ', '.join(f'{key}: {_yaml_scalar(value)}' for key, value in fields.items())
        lines.append(f'  - {{{body}}}  # {plan.reason}')
    with open(path, 'w', encoding='utf-8') as f:
        f.write('\n'.join(lines) + '\n')


def write_config(
    path: str,
    name: str,
    spec_dir: str,
    data_dir: str,
    delimiter: str,
    markers: MarkerPlan,
    task: TaskPlan,
    threshold: ThresholdPlan,
    training: TrainingPlan,
    bad_rows: BadRowsPlan,
    drift: DriftPlan,
    slices: slice_draft.SlicePlan,
) -> None:
    lines = [
        '# Pipeline config by `asynctrain init`; `asynctrain run --config` reads it. Each field is',
        '# a field of PipelineConfig (asynctrain/pipelines/config.py); what is left out keeps its default.',
        "# Named after the data and the label (`pipeline_name`): the name of this pipeline's",
        '# folder of the work directory, which holds its metadata, artifacts and pushed models.',
        f'pipeline_name: {_yaml_scalar(name)}',
        '# The CSV input the sample was read from; `asynctrain run --data DIR` overrides it.',
        f'data: {_yaml_scalar(os.path.abspath(data_dir))}',
        '# Where schema.pbtxt and features.yaml are: this folder.',
        f'dataset: {_yaml_scalar(os.path.abspath(spec_dir))}',
        'example_gen:',
        f'  delimiter: {_yaml_scalar(delimiter)}  # as the sample was read',
        '  # Cells read as missing besides the empty one, in every column:',
        f'  # {markers.reason}',
        f'  null_markers: {json.dumps(list(markers.markers))}',
        f'  max_bad_fraction: {bad_rows.max_bad_fraction}  # {bad_rows.reason}',
        'trainer:',
        f'  # {training.reason}',
        f'  training: {{batch_size: {training.batch_size}, train_steps: {training.train_steps}}}',
        'evaluation:',
        f"  # The {task.task} task's metric; the model is pushed only if it clears this bar.",
        f'  metric: {threshold.metric}',
        f'  {threshold.bound}: {threshold.value}  # {threshold.reason}',
        '  # For daily retraining: also bless only if not worse than the last blessed model by',
        f'  # more than max_regression ({threshold.metric} units); the first run has none to beat.',
        '  baseline: latest_blessed',
        f'  max_regression: {threshold.max_regression}',
        *slice_draft.config_lines(slices, _yaml_scalar),
        'drift:',
        "  # Each run's data is compared with the data the served model was trained on; a drifted",
        '  # feature stops the run before training (action: stop). Defaults: numeric_threshold',
        '  # 0.3 (Jensen-Shannon divergence), categorical_threshold 0.1 (L-infinity distance).',
        f'  # Per-feature thresholds, {drift.reason}:',
        '  features:' + ('' if drift.features else ' {}'),
        *(
            f'    {_yaml_scalar(name)}: {value}  # {reason}'
            for name, (value, reason) in drift.features.items()
        ),
    ]
    with open(path, 'w', encoding='utf-8') as f:
        f.write('\n'.join(lines) + '\n')
