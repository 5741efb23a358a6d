"""A finished run's eval metric beside a standard tabular reference and the trivial baseline, on
the run's own train/eval split: what each dataset README's table reports.

    asynctrain run --config SPEC/config.yaml --work-dir WORK
    .venv/bin/python -m datasets.reference_models --config SPEC/config.yaml --work-dir WORK

Without a finished run in WORK, it writes the split the run would have (ExampleGen's transform,
the same config) and reports the reference and the baseline only.
The reference is scikit-learn's HistGradientBoosting (the version TFX's dependencies install in
.venv; printed), default settings, `random_state=0`, fit on the examples ExampleGen wrote to
`Split-train` and scored on `Split-eval`, on the raw columns the features.yaml uses: a number as
it is (missing as NaN), a string as a category, a `datetime` column as its year, month, day of
month, day of week, day of year, hour and minute (read as the Transform graph reads it). The
trivial baseline predicts the train split's majority class (accuracy), its mean (RMSE), or a
constant (AUC 0.5). Provenance, not part of the pipeline; no test runs it.
"""

from __future__ import annotations

import argparse
import glob
import os

import numpy as np
import tensorflow as tf

from asynctrain.components.transform import calendar_parts
from asynctrain.components.transform import feature_config as fc
from asynctrain.pipelines import dataset, run_summary
from asynctrain.pipelines.config import load_config

_CALENDAR = ('year', 'month', 'day', 'hour', 'minute', 'day_of_week', 'day_of_year')


def examples_dir(config, work_dir: str) -> str:
    """The run's ExampleGen output; without a run, ExampleGen's transform writes the same splits
    (the config's schema, null markers, label and 2:1 hash split) under `work_dir`/examples."""
    found = glob.glob(os.path.join(config.pipeline_root, 'CsvExampleGen', 'examples', '*'))
    if found:
        (examples,) = found
        return examples
    import apache_beam as beam

    from asynctrain.components.example_gen import csv_dialect, csv_source
    from asynctrain.components.shared import feature_types
    from asynctrain.pipelines import pipeline

    loaded = dataset.load(config)

    examples = os.path.join(work_dir, 'examples')
    source = csv_source.CsvSourceConfig(
        input_splits=((('single_split', os.path.join(config.data_dir, '*'))),),
        output_splits=tuple(
            (s.name, s.hash_buckets) for s in pipeline.output_config(config).split_config.splits
        ),
        examples_dir=examples,
        dead_letter_dir=os.path.join(examples, 'dead_letter'),
        summary_path=os.path.join(examples, 'summary.json'),
        dialect=csv_dialect.CsvDialect(
            delimiter=config.example_gen.delimiter, null_markers=config.example_gen.null_markers
        ),
        column_types=feature_types.column_types_from_schema(loaded.schema),
        label_column=loaded.label.column,
    )
    with beam.Pipeline() as p:
        _ = p | csv_source.CsvToExampleFiles(source)
    return examples


def read_split(examples: str, split: str) -> list[dict]:
    """Every example ExampleGen wrote to `split`, as {feature: value or None}."""
    rows = []
    paths = sorted(glob.glob(os.path.join(examples, f'Split-{split}', '*.gz')))
    for record in tf.data.TFRecordDataset(paths, compression_type='GZIP'):
        example = tf.train.Example.FromString(record.numpy())
        row = {}
        for name, feature in example.features.feature.items():
            kind = feature.WhichOneof('kind')
            values = getattr(feature, kind).value if kind else []
            row[name] = values[0] if len(values) else None
        rows.append(row)
    return rows


def _calendar(spec: fc.FeatureSpec, values: list) -> dict[str, np.ndarray]:
    present = [v is not None for v in values]
    if any(isinstance(v, bytes) for v in values):
        civil = calendar_parts.parse_text(tf.constant([v or b'' for v in values]), spec.strptime)
    else:
        # Through numpy: int64 (or float64) as the graph reads the feature; Python ints would make
        # an int32 tensor that parse_epoch's int64 arithmetic refuses.
        civil = calendar_parts.parse_epoch(
            tf.constant(np.asarray([v or 0 for v in values])), tf.constant(present), spec.unit
        )
    valid = civil.valid.numpy()
    return {
        f'{spec.name}_{part}': np.where(valid, getattr(civil, part).numpy(), np.nan)
        for part in _CALENDAR
    }


def feature_matrix(
    features: fc.FeatureConfig, rows: list[dict], categories: dict | None = None
) -> tuple[np.ndarray, list[bool], dict]:
    """(X, which columns are categorical, the categories of each string column, from train)."""
    categories = {} if categories is None else categories
    columns, is_categorical = [], []
    for spec in features.features:
        values = [row.get(spec.name) for row in rows]
        if spec.transform == fc.DATETIME:
            for column in _calendar(spec, values).values():
                columns.append(column.astype(np.float64))
                is_categorical.append(False)
        elif spec.transform == fc.ZSCORE or spec.transform == fc.BUCKETIZE:
            columns.append(np.array([np.nan if v is None else v for v in values], np.float64))
            is_categorical.append(False)
        else:
            known = categories.setdefault(
                spec.name, sorted({v for v in values if v is not None}, key=str)
            )
            index = {v: i for i, v in enumerate(known)}
            # HistGradientBoosting takes at most 255 categories; more are read as ordinals.
            columns.append(np.array([index.get(v, np.nan) for v in values], np.float64))
            is_categorical.append(len(known) <= 255)
    return np.stack(columns, axis=1), is_categorical, categories


def _label(features: fc.FeatureConfig, rows: list[dict]) -> np.ndarray:
    label = features.label
    values = [row[label.column] for row in rows]
    if label.task == fc.REGRESSION:
        return np.array(values, np.float64)
    if label.task == fc.BINARY and label.positive is not None:
        positive = label.positive.encode() if isinstance(label.positive, str) else label.positive
        return np.array([v == positive for v in values], np.int64)
    return np.array(values)


def auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """Probability that a positive row outscores a negative one (ties count half)."""
    pos, neg = scores[positive.astype(bool)], scores[~positive.astype(bool)]
    return float((pos[:, None] > neg[None, :]).mean() + 0.5 * (pos[:, None] == neg[None, :]).mean())


def compare(config_path: str, work_dir: str) -> dict:
    import sklearn
    from sklearn import ensemble

    config = load_config(config_path, work_dir=work_dir)
    loaded = dataset.load(config)
    features = fc.FeatureConfig(label=loaded.label, features=loaded.features.features)
    examples = examples_dir(config, work_dir)
    train, evaluation = read_split(examples, 'train'), read_split(examples, 'eval')
    x_train, categorical, categories = feature_matrix(features, train)
    x_eval, _, _ = feature_matrix(features, evaluation, categories)
    y_train, y_eval = _label(features, train), _label(features, evaluation)
    task = features.label.task
    if task == fc.REGRESSION:
        model = ensemble.HistGradientBoostingRegressor(
            categorical_features=categorical, random_state=0
        )
        reference = float(
            np.sqrt(np.mean((model.fit(x_train, y_train).predict(x_eval) - y_eval) ** 2))
        )
        baseline = float(np.sqrt(np.mean((y_eval - y_train.mean()) ** 2)))
        metric = 'RMSE'
    else:
        model = ensemble.HistGradientBoostingClassifier(
            categorical_features=categorical, random_state=0
        )
        model.fit(x_train, y_train)
        if task == fc.BINARY:
            positive_column = list(model.classes_).index(1)
            reference = auc(model.predict_proba(x_eval)[:, positive_column], y_eval)
            baseline, metric = 0.5, 'AUC'
        else:
            reference = float((model.predict(x_eval) == y_eval).mean())
            values, counts = np.unique(y_train, return_counts=True)
            baseline = float((y_eval == values[counts.argmax()]).mean())
            metric = 'Accuracy'
    ours = None
    if os.path.exists(config.metadata_path):
        ours = run_summary.read_summary(config, started=0.0).eval_metric
    return {
        'metric': metric,
        'ours': ours[1] if ours else None,
        'reference': reference,
        'baseline': baseline,
        'sklearn': sklearn.__version__,
        'train_rows': len(train),
        'eval_rows': len(evaluation),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--config', required=True, help="the run's config.yaml")
    parser.add_argument(
        '--work-dir',
        required=True,
        help="the finished run's work directory; without a run, its split is written there",
    )
    args = parser.parse_args()
    result = compare(args.config, args.work_dir)
    ours = 'no run' if result['ours'] is None else f'{result["ours"]:.4f}'
    print(
        f'{result["metric"]} on eval ({result["train_rows"]} train rows, {result["eval_rows"]} '
        f'eval rows): ours {ours}, HistGradientBoosting (scikit-learn {result["sklearn"]}) '
        f'{result["reference"]:.4f}, trivial baseline {result["baseline"]:.4f}'
    )


if __name__ == '__main__':
    main()
