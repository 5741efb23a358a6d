"""How `asynctrain init`'s lines write counts and measured values: `1 row`, `8,645 rows`,
`1,048`, `26.5`."""

from __future__ import annotations


def count(n: int, noun: str) -> str:
    """`1 row`, `2 rows`, `8,645 rows` (`noun` singular; a plural by adding `s`)."""
    return f'{n:,} {noun}' if n == 1 else f'{n:,} {noun}s'


def rows(n: int) -> str:
    return count(n, 'row')


def value(x: float) -> str:
    """A measured value in four significant digits, grouped by thousands: `1,048`, `26.5`,
    `0.0123`, `1.703e+10`."""
    x = float(x)
    if x.is_integer() and abs(x) < 1e15:
        return f'{int(x):,}'
    text = f'{x:.4g}'
    if 'e' in text and 1e-4 <= abs(x) < 1e15:
        return f'{x:,.2f}'
    return text
