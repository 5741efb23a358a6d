"""`asynctrain bench recsys-data`: a Criteo-like click dataset with a planted signal.

The rows look like Criteo's display-advertising logs: a `click` label (0/1), 13 numeric columns
`I1`..`I13` (non-negative counts, heavy-tailed, some empty) and 26 categorical columns
`C1`..`C26` (8-hex-digit tokens, some empty). The CSV files are `OUTPUT/data/part-NNNNN.csv`
(a directory `asynctrain init` and ExampleGen read as it is), each starting with the header row;
`OUTPUT/planted.json` describes them.

Categorical ids. Column `C{k}` has a vocabulary of `vocabulary_sizes(V)[k-1]` ids: log-spaced
from 10 (`C1`) to `V = --vocabulary-size` (`C23`), and `C24`..`C26` at `V` too, so the largest
tables are several. Each row draws an id's rank `r` in 1..size from the discrete Zipf law
`P(r) ∝ r^-s` (`s = --zipf-exponent`, exactly, by inverse CDF), and writes the token
`hex((A_k * r + B_k) mod 2^32)`, a per-column bijection (A_k odd) that hides the rank order.

The planted signal, known exactly to this module:

    logit = INTERCEPT
          + Σ_{j in NUMERIC_WEIGHTS} w_j · (log1p(I_j) − μ_j)     (0 when I_j is empty)
          + Σ_{k in CATEGORICAL_EFFECTS} σ_k · z_k[r_k]            (0 when r_k > EFFECT_TOP_IDS
                                                                    or C_k is empty)
    click ~ Bernoulli(sigmoid(logit))

where `I_j = floor(exp(N(μ_j, τ_j)))`, and `z_k[r] ~ N(0, 1)` is drawn once per seed for the
`EFFECT_TOP_IDS` most frequent ids of each effect column: the per-id effects sit on ids seen
often enough to be learned (about half the rows carry one per column), the rest of a table is
noise a model must not overfit. The numeric part is linear in `log1p(I)`: a model sees it best
through quantile buckets (`bucketize`). The effect columns include the largest ones (`C24`,
`C26`), so their tables matter. The rows alone suffice to learn it: an L2 logistic regression on
these terms (log1p and a missing flag per weighted numeric column, one-hot ids seen 5+ times),
held out on another 500,000-row file of seed 0, reaches AUC 0.7399, 0.7505 and 0.7533 from
20,000, 100,000 and 500,000 training rows against that file's ceiling of 0.7556.

The quality ceiling: `planted.json` gives the AUC of the true click probability against the
drawn clicks, exactly (rank-based, ties at their mid-rank), over all rows and per file (a
bench that holds one file out for eval reads that file's ceiling). `true_probability` gives the
true probability of rows read back from the CSV, for tests and benches.

The same arguments give the same bytes: every chunk of `CHUNK_ROWS` rows draws from its own
seeded generator (seed, file, chunk), the signal's parameters from another.

    asynctrain bench recsys-data --output DIR [--rows N] [--files F] [--seed S]
        [--vocabulary-size V] [--zipf-exponent s]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from collections.abc import Iterator, Mapping, Sequence

import numpy as np

LABEL = 'click'
NUMERIC_COLUMNS = tuple(f'I{j}' for j in range(1, 14))
CATEGORICAL_COLUMNS = tuple(f'C{k}' for k in range(1, 27))
COLUMNS = (LABEL, *NUMERIC_COLUMNS, *CATEGORICAL_COLUMNS)
PLANTED_FILE = 'planted.json'
DATA_DIR = 'data'

# Rows drawn per generator: part of what fixes the bytes (not an argument for that reason).
CHUNK_ROWS = 65_536
# Criteo's empty-field rates, roughly (I12 is its emptiest numeric column).
NUMERIC_MISSING = (0.45, 0.0, 0.2, 0.2, 0.03, 0.22, 0.04, 0.0, 0.04, 0.45, 0.04, 0.76, 0.2)
# log(I) ~ N(μ_j, τ_j) before the floor.
NUMERIC_MU = (0.5, 2.0, 1.5, 1.2, 7.0, 3.0, 1.0, 2.5, 3.5, 0.3, 1.0, 0.2, 1.2)
NUMERIC_TAU = (1.0, 1.5, 1.2, 1.0, 1.8, 1.6, 1.2, 1.0, 1.4, 0.6, 0.9, 1.0, 1.1)
CATEGORICAL_MISSING = tuple(
    0.4 if k in (19, 20, 22, 25, 26) else 0.04 if k in (3, 4, 12, 16, 21, 24) else 0.0
    for k in range(1, 27)
)
# Columns at the largest vocabulary besides the top of the log-spaced ones.
EXTRA_LARGEST = 3

INTERCEPT = -1.3
NUMERIC_WEIGHTS = {'I1': 0.35, 'I3': -0.3, 'I6': 0.25, 'I11': 0.3}
CATEGORICAL_EFFECTS = {'C2': 0.5, 'C9': 0.6, 'C17': 0.7, 'C24': 0.8, 'C26': 0.6}
EFFECT_TOP_IDS = 100

MAX_VOCABULARY_SIZE = 100_000_000
_HEX = np.frombuffer(b'0123456789abcdef', dtype=np.uint8)
_TOKEN_MODULUS = 1 << 32


@dataclasses.dataclass(frozen=True)
class RecsysData:
    """What to generate; the same values give the same bytes.

    Attributes:
      rows: Rows in all, over `files` files (the first files take one more when uneven).
      files: CSV files, `data/part-00000.csv`, ...
      seed: Seeds the signal's parameters, the token bijections and every chunk's draws.
      vocabulary_size: The largest columns' vocabulary (ids per column span 10..this).
      zipf_exponent: `s` of `P(rank) ∝ rank^-s` (> 0).
    """

    rows: int = 1_000_000
    files: int = 1
    seed: int = 0
    vocabulary_size: int = 1_000_000
    zipf_exponent: float = 1.1

    def __post_init__(self) -> None:
        if self.rows < 1:
            raise ValueError(f'rows: expected an integer >= 1, got {self.rows}')
        if not 1 <= self.files <= self.rows:
            raise ValueError(
                f'files: expected an integer in [1, rows={self.rows}], got {self.files}'
            )
        if not 10 <= self.vocabulary_size <= MAX_VOCABULARY_SIZE:
            raise ValueError(
                f'vocabulary_size: expected an integer in [10, {MAX_VOCABULARY_SIZE}], '
                f'got {self.vocabulary_size}'
            )
        if not self.zipf_exponent > 0:
            raise ValueError(f'zipf_exponent: expected a number > 0, got {self.zipf_exponent}')
        if self.seed < 0:
            raise ValueError(f'seed: expected an integer >= 0, got {self.seed}')

    def file_rows(self) -> list[int]:
        base, extra = divmod(self.rows, self.files)
        return [base + (i < extra) for i in range(self.files)]


def vocabulary_sizes(largest: int) -> tuple[int, ...]:
    """Ids per categorical column, `C1`..`C26`: log-spaced from 10 to `largest`, and the last
    `EXTRA_LARGEST` at `largest`."""
    spaced = len(CATEGORICAL_COLUMNS) - EXTRA_LARGEST
    exponents = np.linspace(1.0, np.log10(largest), spaced)
    sizes = [int(round(10**e)) for e in exponents] + [largest] * EXTRA_LARGEST
    return tuple(min(largest, max(10, s)) for s in sizes)


def zipf_probabilities(size: int, exponent: float) -> np.ndarray:
    """`P(rank)` for ranks 1..size (index 0 is rank 1)."""
    weights = np.arange(1, size + 1, dtype=np.float64) ** -exponent
    return weights / weights.sum()


@dataclasses.dataclass(frozen=True)
class _Signal:
    sizes: tuple[int, ...]
    multipliers: tuple[int, ...]  # A_k, odd
    offsets: tuple[int, ...]  # B_k
    effects: dict[str, np.ndarray]  # column -> σ_k · z_k, index 0 is rank 1


def _signal(data: RecsysData) -> _Signal:
    rng = np.random.default_rng(np.random.SeedSequence(data.seed, spawn_key=(0,)))
    sizes = vocabulary_sizes(data.vocabulary_size)
    multipliers = tuple(int(a) | 1 for a in rng.integers(1, _TOKEN_MODULUS, len(sizes)))
    offsets = tuple(int(b) for b in rng.integers(0, _TOKEN_MODULUS, len(sizes)))
    effects = {}
    for column, sigma in CATEGORICAL_EFFECTS.items():
        size = sizes[CATEGORICAL_COLUMNS.index(column)]
        effects[column] = sigma * rng.standard_normal(min(size, EFFECT_TOP_IDS))
    return _Signal(sizes, multipliers, offsets, effects)


def _logit(signal: _Signal, numeric: dict[str, np.ndarray], ranks: dict[str, np.ndarray]):
    """The planted logit from numeric values (NaN when empty) and ranks (0 when empty)."""
    n = len(next(iter(numeric.values())))
    logit = np.full(n, INTERCEPT)
    for column, weight in NUMERIC_WEIGHTS.items():
        mu = NUMERIC_MU[NUMERIC_COLUMNS.index(column)]
        term = weight * (np.log1p(numeric[column]) - mu)
        logit += np.where(np.isnan(term), 0.0, term)
    for column, effect in signal.effects.items():
        rank = ranks[column]
        inside = (rank >= 1) & (rank <= len(effect))
        logit[inside] += effect[rank[inside] - 1]
    return logit


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def true_probability(data: RecsysData, columns: Mapping[str, Sequence[str]]) -> np.ndarray:
    """The true click probability of rows given as raw CSV text per column (`''` for empty),
    e.g. read back with `csv.DictReader` or `read_columns`."""
    signal = _signal(data)
    numeric = {}
    for column in NUMERIC_WEIGHTS:
        numeric[column] = np.array([float(v) if v != '' else np.nan for v in columns[column]])
    ranks = {}
    for column in CATEGORICAL_EFFECTS:
        k = CATEGORICAL_COLUMNS.index(column)
        tokens = np.array([int(v, 16) if v != '' else -1 for v in columns[column]], np.int64)
        inverse = pow(signal.multipliers[k], -1, _TOKEN_MODULUS)
        unsigned = tokens.astype(np.uint64)
        # Inverse of the bijection, in uint64 arithmetic that wraps modulo 2^64 (a multiple of
        # 2^32), so the low 32 bits are exact.
        rank = ((unsigned - np.uint64(signal.offsets[k])) * np.uint64(inverse)) & np.uint64(
            _TOKEN_MODULUS - 1
        )
        ranks[column] = np.where(tokens < 0, 0, rank.astype(np.int64))
    return _sigmoid(_logit(signal, numeric, ranks))


def read_columns(path: str) -> dict[str, list[str]]:
    """A generated CSV file's columns as raw text (header row first in the file)."""
    with open(path, encoding='ascii') as f:
        header = f.readline().rstrip('\n').split(',')
        values = [line.rstrip('\n').split(',') for line in f]
    return {name: [row[i] for row in values] for i, name in enumerate(header)}


def auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Exact ROC AUC: the Mann-Whitney statistic with tied scores at their mid-rank."""
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels).astype(bool)
    positives = int(labels.sum())
    negatives = len(labels) - positives
    if positives == 0 or negatives == 0:
        raise ValueError('auc: expected both classes among the labels')
    order = np.argsort(scores, kind='stable')
    sorted_scores = scores[order]
    starts = np.flatnonzero(np.r_[True, sorted_scores[1:] != sorted_scores[:-1]])
    ends = np.r_[starts[1:], len(scores)]
    # Ranks are 1-based; a tie group [start, end) shares the mean of its ranks.
    mid_ranks = (starts + 1 + ends) / 2.0
    ranks = np.empty(len(scores))
    ranks[order] = np.repeat(mid_ranks, ends - starts)
    rank_sum = float(ranks[labels].sum())
    return (rank_sum - positives * (positives + 1) / 2.0) / (positives * negatives)


def _digits(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Non-negative integers as left-aligned ASCII digit rows, and their lengths."""
    lengths = np.ones(len(values), dtype=np.int64)
    bound = 10
    while True:
        longer = values >= bound
        if not longer.any():
            break
        lengths += longer
        bound *= 10
    width = int(lengths.max()) if len(values) else 1
    matrix = np.zeros((len(values), width), dtype=np.uint8)
    for j in range(width):
        power = np.power(10, np.maximum(lengths - 1 - j, 0))
        matrix[:, j] = ord('0') + (values // power) % 10
    return matrix, lengths


def _hex_tokens(values: np.ndarray) -> np.ndarray:
    """32-bit values as 8 lowercase hex digits per row."""
    shifts = np.arange(28, -1, -4, dtype=np.uint64)
    nibbles = (values.astype(np.uint64)[:, None] >> shifts) & np.uint64(15)
    return _HEX[nibbles.astype(np.intp)]


def _join(fields: list[tuple[np.ndarray, np.ndarray]]) -> bytes:
    """CSV lines from per-column (bytes matrix, length) pairs: a length 0 field is empty."""
    n = len(fields[0][1])
    lengths = np.stack([length for _, length in fields], axis=1)
    line_lengths = lengths.sum(axis=1) + len(fields)  # the commas and the newline
    line_starts = np.r_[0, np.cumsum(line_lengths)[:-1]]
    buffer = np.full(int(line_lengths.sum()), ord(','), dtype=np.uint8)
    buffer[line_starts + line_lengths - 1] = ord('\n')
    field_starts = line_starts[:, None] + np.c_[np.zeros(n, np.int64), np.cumsum(lengths + 1, 1)]
    for c, (matrix, length) in enumerate(fields):
        # One scatter per column: the bytes of each row's field, its first `length` ones.
        offsets = np.arange(matrix.shape[1])
        kept = offsets[None, :] < length[:, None]
        buffer[(field_starts[:, c, None] + offsets)[kept]] = matrix[kept]
    return buffer.tobytes()


@dataclasses.dataclass
class _Chunk:
    text: bytes
    probability: np.ndarray
    click: np.ndarray


def _chunks(data: RecsysData, signal: _Signal, file_index: int, rows: int) -> Iterator[_Chunk]:
    cdfs: dict[int, np.ndarray] = {}
    for chunk_index, start in enumerate(range(0, rows, CHUNK_ROWS)):
        n = min(CHUNK_ROWS, rows - start)
        rng = np.random.default_rng(
            np.random.SeedSequence(data.seed, spawn_key=(1, file_index, chunk_index))
        )
        numeric, ranks, numeric_fields = {}, {}, []
        for j, column in enumerate(NUMERIC_COLUMNS):
            values = np.floor(np.exp(rng.normal(NUMERIC_MU[j], NUMERIC_TAU[j], n)))
            values = np.minimum(values, 1e9 - 1)
            missing = rng.random(n) < NUMERIC_MISSING[j]
            numeric[column] = np.where(missing, np.nan, values)
            matrix, length = _digits(values.astype(np.int64))
            numeric_fields.append((matrix, np.where(missing, 0, length)))
        categorical_fields = []
        for k, column in enumerate(CATEGORICAL_COLUMNS):
            size = signal.sizes[k]
            if size not in cdfs:
                cdfs[size] = np.cumsum(zipf_probabilities(size, data.zipf_exponent))
            cdf = cdfs[size]
            rank = np.minimum(np.searchsorted(cdf, rng.random(n) * cdf[-1], side='right'), size - 1)
            rank = rank.astype(np.int64) + 1
            missing = rng.random(n) < CATEGORICAL_MISSING[k]
            ranks[column] = np.where(missing, 0, rank)
            token = (rank.astype(np.uint64) * np.uint64(signal.multipliers[k])) + np.uint64(
                signal.offsets[k]
            )
            token &= np.uint64(_TOKEN_MODULUS - 1)
            categorical_fields.append((_hex_tokens(token), np.where(missing, 0, 8)))
        probability = _sigmoid(_logit(signal, numeric, ranks))
        click = (rng.random(n) < probability).astype(np.int64)
        fields = [(ord('0') + click[:, None].astype(np.uint8), np.ones(n, np.int64))]
        text = _join(fields + numeric_fields + categorical_fields)
        yield _Chunk(text, probability, click)


def generate(data: RecsysData, output_dir: str) -> dict:
    """Writes the CSV files into `output_dir/data` and `output_dir/planted.json`; returns what
    it wrote in the latter."""
    data_dir = os.path.join(output_dir, DATA_DIR)
    os.makedirs(data_dir, exist_ok=True)
    signal = _signal(data)
    header = (','.join(COLUMNS) + '\n').encode('ascii')
    files, probabilities, clicks = [], [], []
    for file_index, rows in enumerate(data.file_rows()):
        name = f'part-{file_index:05d}.csv'
        file_probabilities, file_clicks = [], []
        with open(os.path.join(data_dir, name), 'wb') as f:
            f.write(header)
            for chunk in _chunks(data, signal, file_index, rows):
                f.write(chunk.text)
                file_probabilities.append(chunk.probability)
                file_clicks.append(chunk.click)
        p, c = np.concatenate(file_probabilities), np.concatenate(file_clicks)
        probabilities.append(p)
        clicks.append(c)
        files.append({'name': name, **_quality(p, c)})
    planted = {
        'arguments': dataclasses.asdict(data),
        'columns': list(COLUMNS),
        'label': LABEL,
        'vocabulary_sizes': dict(zip(CATEGORICAL_COLUMNS, signal.sizes)),
        'intercept': INTERCEPT,
        'numeric_weights': NUMERIC_WEIGHTS,
        'categorical_effects': CATEGORICAL_EFFECTS,
        'effect_top_ids': EFFECT_TOP_IDS,
        **_quality(np.concatenate(probabilities), np.concatenate(clicks)),
        'files': files,
    }
    with open(os.path.join(output_dir, PLANTED_FILE), 'w', encoding='utf-8') as f:
        json.dump(planted, f, indent=2)
        f.write('\n')
    return planted


def _quality(probability: np.ndarray, click: np.ndarray) -> dict:
    positives = int(click.sum())
    both = 0 < positives < len(click)
    eps = 1e-12
    log_loss = -np.mean(
        click * np.log(probability + eps) + (1 - click) * np.log(1 - probability + eps)
    )
    return {
        'rows': int(len(click)),
        'clicks': positives,
        'ceiling_auc': auc(probability, click) if both else None,
        'ceiling_log_loss': float(log_loss),
        'mean_probability': float(probability.mean()),
    }


def load_planted(output_dir: str) -> tuple[RecsysData, dict]:
    """The arguments a directory was generated with, and its `planted.json`."""
    with open(os.path.join(output_dir, PLANTED_FILE), encoding='utf-8') as f:
        planted = json.load(f)
    return RecsysData(**planted['arguments']), planted


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = RecsysData()
    parser.add_argument('--output', required=True, help='folder for data/*.csv and planted.json')
    parser.add_argument('--rows', type=int, default=defaults.rows, help='rows in all')
    parser.add_argument('--files', type=int, default=defaults.files, help='CSV files')
    parser.add_argument('--seed', type=int, default=defaults.seed)
    parser.add_argument(
        '--vocabulary-size',
        type=int,
        default=defaults.vocabulary_size,
        help=f'ids of the largest columns (default {defaults.vocabulary_size:,})',
    )
    parser.add_argument('--zipf-exponent', type=float, default=defaults.zipf_exponent)


def run(args: argparse.Namespace) -> int:
    try:
        data = RecsysData(
            rows=args.rows,
            files=args.files,
            seed=args.seed,
            vocabulary_size=args.vocabulary_size,
            zipf_exponent=args.zipf_exponent,
        )
    except ValueError as error:
        print(f'asynctrain bench recsys-data: {error}', file=sys.stderr)
        return 2
    started = time.perf_counter()
    planted = generate(data, args.output)
    elapsed = time.perf_counter() - started
    print(
        f'{planted["rows"]:,} rows in {data.files} file(s) in {elapsed:.1f} s '
        f'({planted["rows"] / elapsed:,.0f} rows/s) -> {os.path.join(args.output, DATA_DIR)}\n'
        f'clicks: {planted["clicks"] / planted["rows"]:.3f}, '
        f'ceiling AUC (true probability): {planted["ceiling_auc"]:.4f}'
    )
    return 0
