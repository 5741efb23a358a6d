"""Missing-value markers `asynctrain init` finds without being told: the texts R, pandas and most
exports write for a missing cell (`NA`, `N/A`, `NaN`, `null`, `NULL`, `None`), found in a column
whose other cells are all numbers (or all dates), and the columns that are numbers but for a few
other texts, named with examples so that none is silently read as a string column.

Pure functions over a `csv_sample.TextSample` (the cells as text, before any type is inferred);
ExampleGen reads the proposed markers as missing in every column (`example_gen.null_markers`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from asynctrain.components.example_gen.csv_sample import TextSample
from asynctrain.components.shared import feature_types
from asynctrain.components.shared.feature_types import ColumnType
from asynctrain.pipelines.init import datetime_draft

# In the order they are proposed. pandas' `read_csv`, TFDV's CSV decoder and R read these as
# missing by default; the empty cell is missing already.
COMMON_MARKERS = ('NA', 'N/A', 'NaN', 'null', 'NULL', 'None')
# A column is "numbers but for a few other texts" when at least this share of its non-missing
# cells are numbers (the rest is reported, with up to MAX_EXAMPLES of its texts).
MIN_NUMERIC_SHARE = 0.95
MAX_EXAMPLES = 3
# A cell that reads as a number (as Arrow casts text to int64 or float64).
NUMBER = r'^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$|^[+-]?(?i:nan|inf|infinity)$'


@dataclasses.dataclass(frozen=True)
class MixedColumn:
    """A column that is numbers but for a few other texts: ExampleGen reads it as a string
    column unless those texts are null markers.

    Attributes:
      name: The column.
      cells: How many of its cells are not numbers.
      examples: (text, count) of the most frequent of them.
    """

    name: str
    cells: int
    examples: tuple[tuple[str, int], ...]

    def describe(self) -> str:
        shown = ', '.join(f'{text!r} x{count}' for text, count in self.examples)
        return (
            f'{self.name!r} is numbers but for {self.cells} cells ({shown}): read as text; if '
            f'they mean "missing", pass --null-marker for each'
        )


@dataclasses.dataclass(frozen=True)
class MarkerPlan:
    """The proposed `example_gen.null_markers`.

    Attributes:
      markers: The cell texts read as missing besides the empty cell.
      given: Whether they are the user's `--null-marker`s (then nothing is looked for).
      counts: Marker -> ((column, cells), ...) where it was found, in file order.
      elsewhere: Marker -> ((column, cells), ...) of text columns that hold it too: there it is
        read as missing as well.
      mixed: Columns that are numbers but for a few texts that are not markers.
    """

    markers: tuple[str, ...]
    given: bool
    counts: dict[str, tuple[tuple[str, int], ...]]
    elsewhere: dict[str, tuple[tuple[str, int], ...]]
    mixed: tuple[MixedColumn, ...]

    @property
    def reason(self) -> str:
        if self.given:
            return 'as given with --null-marker'
        if not self.markers:
            return f'none of {", ".join(COMMON_MARKERS)} found in a column of numbers or dates'
        found = '; '.join(
            f'{marker!r} {sum(n for _, n in columns):,} cells in '
            + ', '.join(f'{name} {n:,}' for name, n in columns[:5])
            + (f' and {len(columns) - 5} more columns' if len(columns) > 5 else '')
            for marker, columns in self.counts.items()
        )
        also = '; '.join(
            f'{marker!r} is also read as missing in the text column(s) '
            + ', '.join(f'{name} ({n:,} cells)' for name, n in columns)
            for marker, columns in self.elsewhere.items()
        )
        return f'found without --null-marker in columns otherwise of numbers or dates: {found}' + (
            f'; {also}' if also else ''
        )


def _is_numbers(cells: pa.Array) -> bool:
    return feature_types.infer_column_type(cells) in (ColumnType.INT, ColumnType.FLOAT)


def _is_dates(cells: pa.Array) -> bool:
    values = pc.unique(cells).to_pylist()
    return bool(values) and all(datetime_draft.parse_date(value) for value in values)


def _counts(cells: pa.Array) -> list[tuple[str, int]]:
    counts = pc.value_counts(cells)
    pairs = [(v.as_py(), int(c.as_py())) for v, c in zip(counts.field(0), counts.field(1))]
    return sorted(pairs, key=lambda pair: (-pair[1], pair[0]))


def plan_markers(text: TextSample, given: Sequence[str] = ()) -> MarkerPlan:
    """The user's markers when `given`; otherwise each of COMMON_MARKERS that some column holds
    besides only numbers, or only dates. Either way, the columns that are numbers but for a few
    other texts (MIN_NUMERIC_SHARE) are named."""
    candidates = pa.array(list(COMMON_MARKERS), pa.string())
    found: dict[str, list[tuple[str, int]]] = {}
    for name, cells in text.columns.items():
        present = cells.drop_null()
        if given or not len(present):
            continue
        is_marker = pc.is_in(present, value_set=candidates)
        rest = present.filter(pc.invert(is_marker))
        if not len(rest) or len(rest) == len(present):
            continue
        if _is_numbers(rest) or _is_dates(rest):
            for marker, count in _counts(present.filter(is_marker)):
                found.setdefault(marker, []).append((name, count))
    markers = tuple(given) if given else tuple(m for m in COMMON_MARKERS if m in found)
    elsewhere: dict[str, list[tuple[str, int]]] = {}
    mixed = []
    marker_set = pa.array(list(markers), pa.string())
    for name, cells in text.columns.items():
        present = cells.drop_null()
        is_marker = pc.is_in(present, value_set=marker_set)
        rest = present.filter(pc.invert(is_marker))
        if not len(rest) or _is_numbers(rest):
            continue
        if not given and not _is_dates(rest):
            for marker, count in _counts(present.filter(is_marker)):
                elsewhere.setdefault(marker, []).append((name, count))
        others = rest.filter(pc.invert(pc.match_substring_regex(rest, NUMBER)))
        if len(others) and len(others) <= (1 - MIN_NUMERIC_SHARE) * len(rest):
            mixed.append(MixedColumn(name, len(others), tuple(_counts(others)[:MAX_EXAMPLES])))
    return MarkerPlan(
        markers=markers,
        given=bool(given),
        counts={m: tuple(found[m]) for m in markers if m in found},
        elsewhere={m: tuple(columns) for m, columns in elsewhere.items()},
        mixed=tuple(mixed),
    )
