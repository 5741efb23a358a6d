"""The dead letter: rows ExampleGen rejected, one JSON object per line, and the run summary.

Each record holds the file, the 1-based line where the row starts, the reason, and the row's raw
bytes (as text with undecodable bytes escaped, and exactly, as base64). Nothing here imports
TFX or Beam; `open_fn` lets callers pass Beam's FileSystems for remote storage.
"""

import base64
import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import IO

from asynctrain.components.example_gen.csv_convert import RejectedRow

SUMMARY_FILE_NAME = 'examplegen_summary.json'
DEAD_LETTER_DIR_NAME = 'dead_letter'
FIRST_REJECTED_KEPT = 5


def to_json_line(path: str, row: RejectedRow) -> str:
    return json.dumps(
        {
            'file': path,
            'line': row.line,
            'reason': row.reason,
            'raw': row.raw.decode('utf-8', 'backslashreplace'),
            'raw_base64': base64.b64encode(row.raw).decode('ascii'),
        },
        ensure_ascii=False,
    )


def describe(path: str, row: RejectedRow) -> str:
    """'file:line: reason', the form errors and logs use."""
    return f'{path}:{row.line}: {row.reason}'


def write_rejected(f: IO[bytes], path: str, rows: Iterable[RejectedRow]) -> None:
    for row in rows:
        f.write(to_json_line(path, row).encode('utf-8') + b'\n')


@dataclasses.dataclass
class ChunkReport:
    """Row counts of one converted chunk (or, summed, of a whole run).

    Attributes:
      rows_read: Rows found (blank lines are not rows).
      rows_rejected: Rows sent to the dead letter.
      rows_written: Rows written, per output split.
      first_rejected: Up to FIRST_REJECTED_KEPT rejected rows as (file, line, 'file:line: reason'),
        earliest first.
    """

    rows_read: int = 0
    rows_rejected: int = 0
    rows_written: dict[str, int] = dataclasses.field(default_factory=dict)
    first_rejected: list[tuple] = dataclasses.field(default_factory=list)

    def merge(self, other: 'ChunkReport') -> 'ChunkReport':
        written = dict(self.rows_written)
        for split, count in other.rows_written.items():
            written[split] = written.get(split, 0) + count
        first = sorted(self.first_rejected + other.first_rejected)[:FIRST_REJECTED_KEPT]
        return ChunkReport(
            self.rows_read + other.rows_read,
            self.rows_rejected + other.rows_rejected,
            written,
            first,
        )


def summary(report: ChunkReport, split_names: Sequence[str], seconds: float = 0.0) -> dict:
    """The JSON summary: rows read, rejected, written in total and per split."""
    written = {name: report.rows_written.get(name, 0) for name in split_names}
    return {
        'rows_read': report.rows_read,
        'rows_rejected': report.rows_rejected,
        'rows_written': sum(written.values()),
        'rows_written_per_split': written,
        'first_rejected': [entry[2] for entry in report.first_rejected],
        'seconds': round(seconds, 3),
    }


def bad_fraction_error(summary_json: Mapping, max_bad_fraction: float, dead_letter_dir: str) -> str:
    """The error message when too many rows were rejected, or '' when within the limit."""
    read = summary_json['rows_read']
    rejected = summary_json['rows_rejected']
    if rejected == 0 or rejected <= max_bad_fraction * read:
        return ''
    first = '\n  '.join(summary_json['first_rejected'])
    return (
        f'{rejected} of {read} rows rejected ({rejected / max(read, 1):.2%}), above '
        f'max_bad_fraction={max_bad_fraction}. First rejected rows:\n  {first}\n'
        f'All rejected rows are in {dead_letter_dir}.'
    )


def read_summary(open_fn: Callable[[str], IO[bytes]], path: str) -> dict:
    with open_fn(path) as f:
        return json.loads(f.read().decode('utf-8'))
