"""Penguins over days, for the daily e2e test of a compiled KFP spec: day 1 the committed CSV,
day 2 the same rows with the labels of train-split Adelie and Chinstrap rows partly swapped, so a
model trained on day 2 can no longer tell these two species apart while both days evaluate on the
same clean eval split, and a drifted day whose culmen lengths are in centimetres.

Only rows that land in the train split are corrupted: were the eval rows corrupted too, both
models would score worse alike and the comparison with the baseline would show nothing.
ExampleGen assigns a split by hashing the example's bytes, which include the label, so a swapped
row is kept only if its corrupted version still hashes to train; `splits` computes every row's
split exactly as ExampleGen does (the same reader, encoder and hash). The swaps go in pairs, so
the label's distribution is the same both days: day 2 shows no drift.
"""

from __future__ import annotations

import csv
import glob
import os
import random

from asynctrain.components.example_gen import (
    csv_convert,
    csv_dialect,
    example_encoder,
    split_assignment,
)
from asynctrain.components.shared.feature_types import (
    column_types_from_schema,
    load_schema,
    resolve_column_types,
)
from tests.repository import REPO_ROOT

DATASET = REPO_ROOT / 'datasets' / 'penguins'
LABEL = 'Species'
ADELIE = 'Adelie Penguin (Pygoscelis adeliae)'
CHINSTRAP = 'Chinstrap penguin (Pygoscelis antarctica)'
NULL_MARKERS = ('NA',)
HASH_BUCKETS = (2, 1)  # train, eval: the config's default split
TRAIN, EVAL = 0, 1
DAYS = ('2024-05-01', '2024-05-02')
# A third day whose culmen lengths arrive in centimetres instead of millimetres: drift.
DRIFTED_DAY = '2024-05-03'
DRIFTED_FEATURE = 'Culmen Length (mm)'
DRIFTED_DIVISOR = 10
MIN_VALUE = 0.6  # accuracy; the majority class scores 0.4453 on eval (datasets/penguins/README.md)
MAX_REGRESSION = 0.05
# At least this many train rows must carry a swapped label for the drop to be clear.
MIN_CORRUPTED = 40


def read_rows() -> tuple[list[str], list[dict[str, str]]]:
    (path,) = glob.glob(str(DATASET / 'data' / '*.csv'))
    with open(path, newline='', encoding='utf-8') as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames), list(reader)


def write_rows(path: str, header: list[str], rows: list[dict[str, str]]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w', newline='', encoding='utf-8') as f:
        writer = csv.DictWriter(f, fieldnames=header)
        writer.writeheader()
        writer.writerows(rows)


def splits(path: str, header: list[str]) -> dict[int, int]:
    """Data row index -> the split ExampleGen writes the row to (rows without a label: none),
    computed with ExampleGen's reader, encoder and hash on the file at `path`."""
    schema_types = column_types_from_schema(load_schema(str(DATASET / 'schema.pbtxt')))
    types = resolve_column_types(header, schema_types)
    dialect = csv_dialect.CsvDialect(null_markers=NULL_MARKERS)
    bounds = split_assignment.bucket_bounds(HASH_BUCKETS)
    assigned = {}
    for chunk in csv_convert.convert_file(path, dialect, types, label_column=LABEL):
        encoded = example_encoder.encode_examples(chunk.columns, types)
        indices, _ = split_assignment.hash_splits_and_crcs(
            encoded.buffer.tobytes(), encoded.starts, encoded.ends, bounds, lambda row: 0
        )
        # No cell spans lines in this file: line 2 is row 0.
        assigned.update((line - 2, split) for line, split in zip(chunk.lines.tolist(), indices))
    return assigned


def corrupt_train_labels(
    header: list[str], rows: list[dict[str, str]], scratch: str
) -> list[dict[str, str]]:
    """Swaps labels between pairs of train-split Adelie and Chinstrap rows, keeping a swapped
    row only where its corrupted version still hashes to train; every other row unchanged."""
    write_rows(os.path.join(scratch, 'original.csv'), header, rows)
    original = splits(os.path.join(scratch, 'original.csv'), header)
    train = [i for i, split in original.items() if split == TRAIN]
    chinstraps = [i for i in train if rows[i][LABEL] == CHINSTRAP]
    adelies = [i for i in train if rows[i][LABEL] == ADELIE]
    random.Random(0).shuffle(adelies)
    swapped = [dict(row) for row in rows]
    for chinstrap, adelie in zip(chinstraps, adelies):
        swapped[chinstrap][LABEL], swapped[adelie][LABEL] = ADELIE, CHINSTRAP
    write_rows(os.path.join(scratch, 'swapped.csv'), header, swapped)
    corrupted_splits = splits(os.path.join(scratch, 'swapped.csv'), header)
    return [
        swapped[i] if original.get(i) == TRAIN and corrupted_splits.get(i) == TRAIN else row
        for i, row in enumerate(rows)
    ]


def write_drifted_day(root: str) -> None:
    """`<root>/DRIFTED_DAY/penguins_raw.csv`: day 1's rows with DRIFTED_FEATURE in centimetres."""
    header, rows = read_rows()
    for row in rows:
        if row[DRIFTED_FEATURE] not in ('', *NULL_MARKERS):
            row[DRIFTED_FEATURE] = str(float(row[DRIFTED_FEATURE]) / DRIFTED_DIVISOR)
    write_rows(os.path.join(root, DRIFTED_DAY, 'penguins_raw.csv'), header, rows)


def write_days(root: str, scratch: str) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """`<root>/<YYYY-MM-DD>/penguins_raw.csv` for both DAYS; returns (day 1 rows, day 2 rows)."""
    header, rows = read_rows()
    day2 = corrupt_train_labels(header, rows, scratch)
    for day, day_rows in zip(DAYS, (rows, day2)):
        write_rows(os.path.join(root, day, 'penguins_raw.csv'), header, day_rows)
    return rows, day2
