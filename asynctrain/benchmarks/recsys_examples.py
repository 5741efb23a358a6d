"""The input and the meters of `asynctrain bench recsys`.

Input: the generator's Criteo-like CSV (`recsys_data`) turned into transformed examples as
Transform would make them, in NumPy rather than a Beam pipeline (the bench measures training;
`bench transform` measures Transform): each numeric column `log1p(I)`, standardized with the
training files' mean and deviation, 0 when empty; each categorical column through a vocabulary of
the train split as `features.yaml`'s `vocabulary` with `top_k` the column's vocabulary size makes
it (`vocabulary_ids`): ids by descending train count, the rest and empty cells one OOV id, so
the table of a column with a vocabulary of 10^7 has 10^7 + 1 rows. Not hashing: a hash into as
many buckets as the column has values puts about a third of its frequent ids, the ones that carry
the planted effects, in a bucket with another frequent id, which cost 0.013-0.02 AUC at every
size. The last CSV file is the eval split, the others the train split (shuffled), written where
the Trainer reads them in the ExampleBatcher's columnar format (GZIP TFRecords, each record 256
examples column by column), which both trainers read alike.

Meters:
- `loopback_bytes`: bytes received on the loopback interface (`/proc/net/dev`, `lo`), which
  carries every gRPC message between the coordinator, the workers and the parameter servers of a
  cluster on 127.0.0.1. It counts every process's loopback traffic in this network namespace:
  exact only when the bench runs in a namespace of its own (`unshare -n`, see `recsys`), which
  `loopback_isolated` tells.
- `rss_bytes`: the resident memory of a process (`/proc/PID/status`, `VmRSS`).
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from asynctrain.benchmarks import recsys_data

LABEL = recsys_data.LABEL
TRAIN_SPLIT, EVAL_SPLIT = 'train', 'eval'
EXAMPLES_PER_RECORD = 256


@dataclasses.dataclass(frozen=True)
class RecsysExamples:
    """Transformed examples of one generated dataset.

    Attributes:
      examples_dir: `Split-train/` and `Split-eval/` of GZIP TFRecords of tf.Examples.
      table_rows: The id range of each categorical feature (its table's rows).
      train_rows: Examples in the train split.
      eval_rows: Examples in the eval split.
      ceiling_auc: The planted ceiling: the AUC of the true click probability on the eval
        split's clicks.
    """

    examples_dir: str
    table_rows: dict
    train_rows: int
    eval_rows: int
    ceiling_auc: float

    def feature_spec(self) -> dict:
        import tensorflow as tf

        spec = {name: tf.io.FixedLenFeature([], tf.float32) for name in recsys_data.NUMERIC_COLUMNS}
        spec.update(
            {name: tf.io.FixedLenFeature([], tf.int64) for name in recsys_data.CATEGORICAL_COLUMNS}
        )
        spec[LABEL] = tf.io.FixedLenFeature([], tf.int64)
        return spec


def _numeric(values: list[str]) -> np.ndarray:
    """log1p of the counts, NaN where empty."""
    array = np.array([float(v) if v else np.nan for v in values])
    return np.log1p(array)


def vocabulary_ids(
    train_tokens: np.ndarray, top_k: int, *columns: np.ndarray
) -> tuple[np.ndarray, ...]:
    """Each of `columns` as ids of the train split's vocabulary: its `top_k` most frequent
    non-empty tokens get ids 0..top_k-1 by descending count (ties by token), anything else id
    `top_k` (one OOV row)."""
    values, counts = np.unique(train_tokens[train_tokens != ''], return_counts=True)
    kept = values[np.lexsort((values, -counts))[:top_k]]  # in id order
    if not len(kept):
        return tuple(np.full(len(tokens), top_k, np.int64) for tokens in columns)
    by_token = np.argsort(kept)
    sorted_tokens = kept[by_token]
    mapped = []
    for tokens in columns:
        at = np.minimum(np.searchsorted(sorted_tokens, tokens), len(kept) - 1)
        found = sorted_tokens[at] == tokens
        mapped.append(np.where(found, by_token[at], top_k).astype(np.int64))
    return tuple(mapped)


def _write_split(
    split_dir: str, columns: dict[str, np.ndarray], labels: np.ndarray, seed: int | None
) -> None:
    """Writes one split in the ExampleBatcher's columnar format (`columnar_records`: each record
    a `tf.Example` holding `EXAMPLES_PER_RECORD` examples column by column), which the Trainer's
    input reads in one parse per record; rows shuffled with `seed` first unless it is None."""
    import tensorflow as tf

    from asynctrain.components.shared import columnar_records

    os.makedirs(split_dir, exist_ok=True)
    columns = {**columns, LABEL: labels}
    order = np.arange(len(labels))
    if seed is not None:
        order = np.random.default_rng(seed).permutation(len(labels))
    with tf.io.TFRecordWriter(os.path.join(split_dir, 'data.gz'), options='GZIP') as writer:
        for start in range(0, len(order), EXAMPLES_PER_RECORD):
            rows = order[start : start + EXAMPLES_PER_RECORD]
            feature = {}
            for name, values in columns.items():
                chosen = values[rows]
                if chosen.dtype == np.float32:
                    feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=chosen))
                else:
                    feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=chosen))
            example = tf.train.Example(features=tf.train.Features(feature=feature))
            writer.write(example.SerializeToString())
    columnar_records.write_metadata(
        split_dir,
        {
            'format': columnar_records.FORMAT,
            'examples_per_record': EXAMPLES_PER_RECORD,
            'examples': len(labels),
            'records': -(-len(labels) // EXAMPLES_PER_RECORD),
            'files': 1,
            'features': {name: values.dtype.name for name, values in sorted(columns.items())},
            'seed': seed,
        },
    )


def make_examples(data: recsys_data.RecsysData, output_dir: str) -> RecsysExamples:
    """Generates `data` under `output_dir/csv`, then its transformed examples under
    `output_dir/examples` (the last file the eval split)."""
    if data.files < 2:
        raise ValueError(f'files: expected at least 2 (train and eval), got {data.files}')
    csv_dir = os.path.join(output_dir, 'csv')
    planted = recsys_data.generate(data, csv_dir)
    raw = [
        recsys_data.read_columns(os.path.join(csv_dir, recsys_data.DATA_DIR, f['name']))
        for f in planted['files']
    ]
    sizes = dict(
        zip(recsys_data.CATEGORICAL_COLUMNS, recsys_data.vocabulary_sizes(data.vocabulary_size))
    )
    splits = {TRAIN_SPLIT: raw[:-1], EVAL_SPLIT: raw[-1:]}
    merged = {
        split: {name: sum((part[name] for part in parts), []) for name in recsys_data.COLUMNS}
        for split, parts in splits.items()
    }
    statistics = {}
    for name in recsys_data.NUMERIC_COLUMNS:
        train = _numeric(merged[TRAIN_SPLIT][name])
        statistics[name] = (np.nanmean(train), np.nanstd(train) or 1.0)
    ids = {}
    for name in recsys_data.CATEGORICAL_COLUMNS:
        tokens = {split: np.array(columns[name]) for split, columns in merged.items()}
        mapped = vocabulary_ids(tokens[TRAIN_SPLIT], sizes[name], *tokens.values())
        ids[name] = dict(zip(tokens, mapped))
    examples_dir = os.path.join(output_dir, 'examples')
    rows = {}
    for split, columns in merged.items():
        transformed = {}
        for name in recsys_data.NUMERIC_COLUMNS:
            mean, std = statistics[name]
            z = (_numeric(columns[name]) - mean) / std
            transformed[name] = np.where(np.isnan(z), 0.0, z).astype(np.float32)
        for name in recsys_data.CATEGORICAL_COLUMNS:
            transformed[name] = ids[name][split]
        labels = np.array(columns[LABEL], dtype=np.int64)
        seed = data.seed if split == TRAIN_SPLIT else None
        _write_split(os.path.join(examples_dir, f'Split-{split}'), transformed, labels, seed)
        rows[split] = len(labels)
    return RecsysExamples(
        examples_dir=examples_dir,
        table_rows={name: size + 1 for name, size in sizes.items()},
        train_rows=rows[TRAIN_SPLIT],
        eval_rows=rows[EVAL_SPLIT],
        ceiling_auc=float(planted['files'][-1]['ceiling_auc']),
    )


def _interfaces() -> dict[str, int]:
    """Bytes received per network interface in this network namespace."""
    received = {}
    with open('/proc/net/dev', encoding='ascii') as f:
        for line in f.readlines()[2:]:
            name, counters = line.split(':', 1)
            received[name.strip()] = int(counters.split()[0])
    return received


def loopback_bytes() -> int:
    """Bytes received on `lo` so far (each byte sent over loopback is received once)."""
    return _interfaces()['lo']


def loopback_isolated() -> bool:
    """Whether `lo` is this network namespace's only interface: then no other process on the
    machine adds to `loopback_bytes`, unless it runs in this namespace too."""
    return set(_interfaces()) == {'lo'}


def rss_bytes(pid: int) -> int:
    """Resident memory of process `pid`."""
    with open(f'/proc/{pid}/status', encoding='ascii') as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1]) * 1024
    raise ValueError(f'/proc/{pid}/status: no VmRSS line')
