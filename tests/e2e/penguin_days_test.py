"""The penguin days of the daily compiled e2e test hold what that test relies on: day 2 differs
from day 1 in train-split labels only, swapped in pairs, enough of them to matter; the drifted
day differs in its culmen lengths only."""

import csv

import pytest

from tests.e2e.penguin_days import (
    ADELIE,
    CHINSTRAP,
    DAYS,
    DRIFTED_DAY,
    DRIFTED_DIVISOR,
    DRIFTED_FEATURE,
    EVAL,
    LABEL,
    MIN_CORRUPTED,
    TRAIN,
    splits,
    write_days,
    write_drifted_day,
)

# One pytest-xdist worker for the module: its module-scoped fixtures are built once.
pytestmark = pytest.mark.xdist_group('e2e.penguin_days_test')


@pytest.fixture(scope='module')
def days(tmp_path_factory):
    root = tmp_path_factory.mktemp('dated')
    rows, day2 = write_days(str(root), str(tmp_path_factory.mktemp('scratch')))
    write_drifted_day(str(root))
    return root, rows, day2


def test_the_corruption_is_in_train_rows_only(days):
    root, rows, day2 = days
    header = list(rows[0])
    original = splits(str(root / DAYS[0] / 'penguins_raw.csv'), header)
    corrupted = splits(str(root / DAYS[1] / 'penguins_raw.csv'), header)
    changed = [i for i, (a, b) in enumerate(zip(rows, day2)) if a != b]

    # Only labels changed, only between Adelie and Chinstrap, only in rows of the train split.
    assert all({k for k in rows[i] if rows[i][k] != day2[i][k]} == {LABEL} for i in changed)
    assert all({rows[i][LABEL], day2[i][LABEL]} == {ADELIE, CHINSTRAP} for i in changed)
    assert all(original[i] == corrupted[i] == TRAIN for i in changed)
    # Swapped in pairs: each species keeps its count.
    assert sorted(r[LABEL] for r in rows) == sorted(r[LABEL] for r in day2)
    # The eval split holds the same rows both days, unchanged.
    assert {i for i, s in original.items() if s == EVAL} == {
        i for i, s in corrupted.items() if s == EVAL
    }
    assert len(changed) >= MIN_CORRUPTED
    train_chinstraps = [
        i for i, s in corrupted.items() if s == TRAIN and rows[i][LABEL] == CHINSTRAP
    ]
    relabeled = [i for i in train_chinstraps if day2[i][LABEL] == ADELIE]
    # Most train Chinstraps are labeled Adelie on day 2.
    assert len(relabeled) > len(train_chinstraps) / 2, (len(relabeled), len(train_chinstraps))


def test_the_drifted_day_has_culmen_lengths_in_centimetres_and_nothing_else_changed(days):
    root, rows, _ = days
    with open(root / DRIFTED_DAY / 'penguins_raw.csv', newline='', encoding='utf-8') as f:
        drifted = list(csv.DictReader(f))
    assert len(drifted) == len(rows)
    masses = 0
    for before, after in zip(rows, drifted):
        assert {k for k in before if before[k] != after[k]} <= {DRIFTED_FEATURE}
        if before[DRIFTED_FEATURE] != 'NA':
            assert float(after[DRIFTED_FEATURE]) * DRIFTED_DIVISOR == pytest.approx(
                float(before[DRIFTED_FEATURE])
            )
            masses += 1
    assert masses > 300
