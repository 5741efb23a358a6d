"""Nested values (dicts, lists, numbers: a proto as `MessageToDict` gives it) compared with a
tolerance on floats, naming the path of the first difference."""

from __future__ import annotations

import pytest


def assert_close(left, right, where: str = '', rel: float = 1e-9, abs_: float = 1e-12) -> None:
    """Equal keys, lengths, types and values; floats within `rel` (or `abs_` near zero), for sums
    taken in another order."""
    assert type(left) is type(right), f'{where}: {type(left).__name__} != {type(right).__name__}'
    if isinstance(right, dict):
        assert sorted(left) == sorted(right), where
        for key in right:
            assert_close(left[key], right[key], f'{where}.{key}', rel, abs_)
    elif isinstance(right, list):
        assert len(left) == len(right), where
        for i, (a, b) in enumerate(zip(left, right)):
            assert_close(a, b, f'{where}[{i}]', rel, abs_)
    elif isinstance(right, float):
        assert left == pytest.approx(right, rel=rel, abs=abs_), where
    else:
        assert left == right, where
