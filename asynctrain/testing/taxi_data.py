"""Taxi-like data of any size: the Chicago taxi sample bundled with TFX, and CSVs resampled
from it, for tests and benches that need more rows than the sample's 15,002.

The rows are the sample's own (drawn with replacement, whole lines, the header kept), so every
value a component meets exists in the real data; the same seed writes the same bytes.
"""

from __future__ import annotations

import os

import numpy as np

from asynctrain.pipelines.config import bundled_data_dir

# Lines joined and written per block: bounds the memory of a large CSV's writing.
_BLOCK_ROWS = 100_000


def taxi_csv_path() -> str:
    """The Chicago taxi sample bundled with TFX (read in place, never copied)."""
    return os.path.join(bundled_data_dir(), 'data.csv')


def generate_csv(rows: int, path: str, seed: int = 0) -> int:
    """Writes `rows` rows sampled (with replacement) from the taxi sample; returns its bytes."""
    with open(taxi_csv_path(), 'rb') as f:
        header = f.readline()
        lines = [line if line.endswith(b'\n') else line + b'\n' for line in f if line.strip()]
    rng = np.random.default_rng(seed)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'wb') as f:
        f.write(header)
        for start in range(0, rows, _BLOCK_ROWS):
            picks = rng.integers(0, len(lines), min(_BLOCK_ROWS, rows - start))
            f.write(b''.join(lines[i] for i in picks))
    return os.path.getsize(path)
