"""How the Evaluator resamples a batch's examples for confidence intervals, as TFMA does:

- the jackknife (`jackknife`): each (slice, example) in a random one of 20 partitions;
- the Poisson bootstrap (`bootstrap`): each (slice, example) added to each of 20 samples as many
  times as a Poisson(1) draw says (TFMA's `evaluators/poisson_bootstrap.py`,
  `_BootstrapCombineFn`, whose elements are single examples).

TFMA draws both unseeded. Our bootstrap draws are a function of the seed, the example's bytes,
the slice and the sample (`example_keys`, `poisson_draws`): the same intervals on every run,
whatever the runner makes of the bundles and batches (draws seeded per batch changed whenever
the batches' contents did, and those are the runner's). Byte-identical examples draw alike, so a
sample resamples distinct examples.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

import numpy as np
from tensorflow_model_analysis.evaluators import poisson_bootstrap

# The state key of a slice's unsampled examples under the bootstrap (TFMA's sample id for them).
FULL_SAMPLE = poisson_bootstrap._FULL_SAMPLE_ID  # pylint: disable=protected-access
# The bootstrap's seed when none is given: ours is deterministic, TFMA's unseeded.
BOOTSTRAP_SEED = 0

# P(Poisson(1) <= k) for k = 0..23; 1 - P(<= 23) is below 2**-53, the draws' resolution.
_POISSON_CDF = np.cumsum([math.exp(-1.0) / math.factorial(k) for k in range(24)])
# SplitMix64's increment: odd, so sample counters spread over all 64 bits.
_GAMMA = np.uint64(0x9E3779B97F4A7C15)


def example_keys(batch: Sequence[bytes], seed: int | None = None) -> np.ndarray:
    """One uint64 per serialized example: a keyed hash of its bytes under `seed` (else
    `BOOTSTRAP_SEED`)."""
    key = str(BOOTSTRAP_SEED if seed is None else seed).encode()
    digests = b''.join(hashlib.blake2b(e, digest_size=8, key=key).digest() for e in batch)
    return np.frombuffer(digests, dtype='<u8').astype(np.uint64)


def _mix(values: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finalizer, element-wise: a bijection of uint64 in which every output
    bit depends on every input bit."""
    z = np.array(values, dtype=np.uint64)
    z ^= z >> np.uint64(33)
    z *= np.uint64(0xFF51AFD7ED558CCD)
    z ^= z >> np.uint64(33)
    z *= np.uint64(0xC4CEB9FE1A85EC53)
    z ^= z >> np.uint64(33)
    return z


def _slice_stream(slice_key: tuple) -> np.uint64:
    """A uint64 per slice key (its repr hashed), so that each slice draws its own."""
    digest = hashlib.blake2b(repr(slice_key).encode(), digest_size=8).digest()
    return np.uint64(int.from_bytes(digest, 'little'))


def poisson_draws(keys: np.ndarray, slice_key: tuple, num_samples: int) -> np.ndarray:
    """[num_samples, len(keys)] Poisson(1) draws, one per (sample, example of `keys`) of the
    slice: a counter-based generator (SplitMix64's construction) of the example's key, the
    slice and the sample, turned into a count by the inverse of Poisson(1)'s distribution."""
    counters = _slice_stream(slice_key) + _GAMMA * np.arange(1, num_samples + 1, dtype=np.uint64)
    bits = _mix(_mix(keys[None, :] + _mix(counters)[:, None]))
    uniform = (bits >> np.uint64(11)).astype(np.float64) * 2.0**-53
    return np.searchsorted(_POISSON_CDF, uniform, side='right')


def unsampled(rows) -> list[tuple[int, np.ndarray | None, None]]:
    """Without intervals: all of a slice's `rows` (an int: all rows of a batch that size, None
    in the result) in state 0."""
    return [(0, None if isinstance(rows, int) else rows, None)]


def jackknife(rows, random: np.random.Generator, num_partitions: int) -> list[tuple]:
    """[(partition, rows, None)]: each of the slice's `rows` (an int: that many) in a random one
    of `num_partitions`, as TFMA's jackknife puts them (unseeded there too)."""
    rows = np.arange(rows) if isinstance(rows, int) else rows
    drawn = random.integers(num_partitions, size=rows.size)
    return [(int(p), rows[drawn == p], None) for p in np.unique(drawn)]


def bootstrap(rows, keys: np.ndarray, slice_key: tuple, num_samples: int) -> list[tuple]:
    """[(state key, rows, multiplicities)] of the slice `slice_key`'s `rows` of a batch whose
    examples' keys are `keys` (`example_keys`; `rows` an int: all of them, None in the result):
    all rows in `FULL_SAMPLE`, and in each sample s the rows drawn at least once, with how
    often. Every sample is listed, with no rows when it drew none (TFMA's sample of a slice
    exists whatever it drew)."""
    whole = isinstance(rows, int)
    rows = np.arange(rows) if whole else rows
    times = poisson_draws(keys[rows], slice_key, num_samples)
    out = [(FULL_SAMPLE, None if whole else rows, None)]
    for sample, drawn in enumerate(times):
        chosen = np.flatnonzero(drawn)
        out.append((sample, rows[chosen], drawn[chosen]))
    return out
