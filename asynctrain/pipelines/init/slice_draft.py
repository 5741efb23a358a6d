"""The slices `asynctrain init` proposes for the Evaluator: each categorical column with few
values, so that every value of it gets its own metrics (TFMA's `slicing_specs`), each with the
reason a reviewer reads beside it.

A column is proposed when its features.yaml transform is a vocabulary (a string, or an int with
few values), it has at most `MAX_SLICE_VALUES` values in the sample and its rarest value has at
least `MIN_SLICE_ROWS` rows there: fewer rows give a slice metric too noisy to read (the eval
split sees about a third of them). For a binary label, whose gate is AUC, each value must also
have `MIN_SLICE_CLASS_ROWS` positive and as many negative rows: a slice with one class has no
AUC, and one with a handful of positives an AUC that swings with each of them (on a 6%-positive
label, counting rows alone proposed values with no positive at all). Slices are proposed
ungated: the gate per slice (`slice_min_value` / `slice_max_value`) is written commented out at
the whole split's bound, for the reviewer to turn on once the slices' values are known. Feature
crosses are not proposed: their slices multiply and most would be too small on a sample.
"""

from __future__ import annotations

import dataclasses

import pyarrow.compute as pc

from asynctrain.components.example_gen.csv_sample import CsvSample
from asynctrain.pipelines.init import wording
from asynctrain.pipelines.init.pipeline_draft import ColumnPlan, TaskPlan, ThresholdPlan

# At most this many values: each becomes a slice in the evaluation and its summary.
MAX_SLICE_VALUES = 10
# The rarest value must have this many rows in the sample.
MIN_SLICE_ROWS = 30
# Binary labels: each value must have this many positive rows in the sample, and as many
# negative ones (the eval split sees about a third: some ten of each for the slice's AUC).
MIN_SLICE_CLASS_ROWS = 30
# At most this many columns are proposed (the first ones, in file order).
MAX_SLICED_COLUMNS = 3


@dataclasses.dataclass(frozen=True)
class SlicePlan:
    """The slices proposed, with a reason per column considered.

    Attributes:
      slices: The proposed `evaluation.slices`: one single-column slice per proposed column.
      reasons: {column: why it was or was not proposed}, for every vocabulary column.
      gate_key: `slice_min_value` or `slice_max_value`: the per-slice bound of the task's metric.
      gate_value: The whole split's bound (`ThresholdPlan.value`), written commented out.
    """

    slices: tuple[tuple[str, ...], ...]
    reasons: dict[str, str]
    gate_key: str
    gate_value: float


def plan_slices(
    sample: CsvSample, columns: list[ColumnPlan], threshold: ThresholdPlan, task: TaskPlan
) -> SlicePlan:
    """The SlicePlan for the sample's vocabulary columns, in file order."""
    slices: list[tuple[str, ...]] = []
    reasons = {}
    for plan in columns:
        if plan.transform != 'vocabulary':
            continue
        counts = pc.value_counts(sample.columns[plan.name].drop_null())
        pairs = sorted(
            ((v.as_py(), int(c.as_py())) for v, c in zip(counts.field(0), counts.field(1))),
            key=lambda pair: (pair[1], str(pair[0])),
        )
        (rarest, rarest_rows), values = pairs[0], len(pairs)
        if values > MAX_SLICE_VALUES:
            reasons[plan.name] = f'not sliced: {values} values (more than {MAX_SLICE_VALUES})'
        elif rarest_rows < MIN_SLICE_ROWS:
            reasons[plan.name] = (
                f'not sliced: its rarest value {rarest!r} has {wording.rows(rarest_rows)} in the '
                'sample '
                f'(fewer than {MIN_SLICE_ROWS})'
            )
        elif task.task == 'binary' and (lacking := _fewest_of_a_class(sample, plan.name, task)):
            value, rows, which = lacking
            reasons[plan.name] = (
                f'not sliced: its value {value!r} has {wording.rows(rows)} with a {which} label '
                f'in the sample (fewer than {MIN_SLICE_CLASS_ROWS} of each class, for an AUC per '
                'slice)'
            )
        elif len(slices) == MAX_SLICED_COLUMNS:
            reasons[plan.name] = f'not sliced: {MAX_SLICED_COLUMNS} columns are sliced already'
        else:
            slices.append((plan.name,))
            reasons[plan.name] = (
                f'{values} values, the rarest value {rarest!r}, with {rarest_rows:,} of '
                f'{wording.rows(sample.rows)} in the sample'
            )
    return SlicePlan(tuple(slices), reasons, f'slice_{threshold.bound}', threshold.value)


def _fewest_of_a_class(
    sample: CsvSample, column: str, task: TaskPlan
) -> tuple[object, int, str] | None:
    """(value, rows, 'positive' or 'negative') of the column's value with the fewest rows of one
    class of the binary label, when fewer than MIN_SLICE_CLASS_ROWS; None when every value has
    enough of both. Rows without the value or the label are not counted."""
    counts: dict[object, list[int]] = {}
    labels = sample.columns[task.column].to_pylist()
    for value, label in zip(sample.columns[column].to_pylist(), labels):
        if value is not None and label is not None:
            counts.setdefault(value, [0, 0])[0 if label == task.positive else 1] += 1
    fewest = min(
        (
            (value, rows, which)
            for value, classes in counts.items()
            for rows, which in zip(classes, ('positive', 'negative'))
        ),
        key=lambda item: (item[1], str(item[0]), item[2]),
        default=None,
    )
    return fewest if fewest is not None and fewest[1] < MIN_SLICE_CLASS_ROWS else None


def config_lines(plan: SlicePlan, yaml_scalar) -> list[str]:
    """The `evaluation:` lines of config.yaml for the plan (indented by two spaces)."""
    considered = [f'  #   {name}: {reason}' for name, reason in plan.reasons.items()]
    if not plan.slices:
        return [
            '  # No slice proposed (a categorical column with 2 to '
            f'{MAX_SLICE_VALUES} values, each in {MIN_SLICE_ROWS}+ rows, and for a binary label '
            f'{MIN_SLICE_CLASS_ROWS}+ of each class, would be):',
            *considered,
        ]
    slices = ', '.join('[' + ', '.join(yaml_scalar(c) for c in s) + ']' for s in plan.slices)
    return [
        '  # Slices: each value of these columns gets its own metrics in the evaluation',
        '  # (`tfma.view.render_slicing_metrics`); proposed for the categorical columns with few',
        '  # values, each with enough rows (and, for a binary label, enough of each class):',
        *considered,
        f'  slices: [{slices}]',
        '  # To also gate every slice (not pushed when any slice misses the bound), uncomment:',
        f'  # {plan.gate_key}: {plan.gate_value}',
    ]


def describe(plan: SlicePlan) -> str:
    """init's console line for the slices."""
    if not plan.slices:
        return (
            'slices: none proposed (no categorical column with few values, each in enough rows '
            'of each class)'
        )
    names = ', '.join(s[0] for s in plan.slices)
    return f'slices: {names} (reported, not gated: {plan.gate_key} in config.yaml)'
