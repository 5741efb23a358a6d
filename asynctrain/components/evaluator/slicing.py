"""The slices of a batch, as TFMA slices examples: which rows fall in which slice key.

TFMA (`extractors/slice_key_extractor.py`, `slicer/slicer_lib.py`) gives each example the slice
keys of every `slicing_specs` entry and of the baseline and comparison specs of every
`cross_slicing_specs` entry: the product of the example's distinct values of each `feature_keys`
column, when every `feature_values` pair matches. Values are typed as TFMA types them: bytes
decoded to `str`, integers `int`, floats the float32 value as a Python `float`.

One departure, on purpose: a feature is always read from the raw serialized example. TFMA's
`SliceAccessor` looks a feature up first among the transformed features, so a raw column that the
transform outputs under the same name (the taxi pipeline's `payment_type`, a vocabulary id) is
sliced by its transformed value there: `payment_type:0` instead of `payment_type:Cash`, and an
eval-only value merged into the out-of-vocabulary id. Slices here are the raw values the
configuration names, whatever the transform calls its outputs; the equivalence tests run TFMA
with a slice key extractor that reads the raw features alone
(`asynctrain.testing.evaluation_outputs.run_stock`).

Here it is done batch-wise: each column's (row, value) pairs come from one vectorized parse, the
rows of a slice key from `numpy` joins and groupings, and Python only builds one tuple per slice
key of a batch, not per example.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import tensorflow as tf
from tensorflow_model_analysis.slicer import slicer_lib

# A slice key as TFMA writes it: () for the overall slice, else sorted (column, value) pairs.
SliceKey = tuple
# One column of a batch: (rows, values), a row once per distinct value it has.
Column = tuple[np.ndarray, np.ndarray]


def slice_specs(eval_config) -> list[slicer_lib.SingleSliceSpec]:
    """The single-slice specs whose slices are computed, in TFMA's order and de-duplication
    (`SliceKeyExtractor`): `slicing_specs`, then the cross specs' baseline and comparison specs;
    the overall slice alone when there are none. ValueError names what is unsupported."""
    for index, spec in enumerate(eval_config.slicing_specs):
        if spec.slice_keys_sql:
            raise ValueError(f'eval_config.slicing_specs[{index}].slice_keys_sql: not supported')
    for index, cross in enumerate(eval_config.cross_slicing_specs):
        for field, specs in (
            ('baseline_spec', [cross.baseline_spec]),
            ('slicing_specs', cross.slicing_specs),
        ):
            if any(spec.slice_keys_sql for spec in specs):
                raise ValueError(
                    f'eval_config.cross_slicing_specs[{index}].{field}.slice_keys_sql: not supported'
                )
    if eval_config.options.min_slice_size.value > 1 and eval_config.cross_slicing_specs:
        # TFMA's `FilterOutSlices` counts single slices only: it has no count for a cross slice.
        raise ValueError(
            'eval_config.options.min_slice_size: not supported with cross_slicing_specs'
        )
    specs = [slicer_lib.SingleSliceSpec(spec=s) for s in eval_config.slicing_specs]
    for cross in eval_config.cross_slicing_specs:
        for spec in (cross.baseline_spec, *cross.slicing_specs):
            single = slicer_lib.SingleSliceSpec(spec=spec)
            if single not in specs:
                specs.append(single)
    return specs or [slicer_lib.SingleSliceSpec()]


def feature_names(specs: Iterable[slicer_lib.SingleSliceSpec]) -> tuple[str, ...]:
    """The features the specs slice on."""
    names = set()
    for spec in specs:
        names |= set(spec._columns) | {key for key, _ in spec._features}  # pylint: disable=protected-access
    return tuple(sorted(names))


class RawFeatureParser:
    """Parses the slice features out of serialized `tf.Example`s, each with its own type.

    `tf.io.parse_example` needs a feature's type (bytes, int64 or float list) and the Evaluator
    has no schema: the type is read from the first example that has the feature, once.
    """

    def __init__(self, names: Sequence[str]):
        self._names = tuple(names)
        self._dtypes: dict[str, tf.DType] = {}

    def parse(self, examples: Sequence[bytes]) -> dict[str, Column]:
        """{feature: (rows, values)} of the features some example of the batch has."""
        self._learn_types(examples)
        spec = {name: tf.io.VarLenFeature(dtype) for name, dtype in self._dtypes.items()}
        if not spec:
            return {}
        try:
            parsed = tf.io.parse_example(tf.constant(examples, dtype=tf.string), spec)
        except tf.errors.InvalidArgumentError as e:
            raise ValueError(
                f'slice features {sorted(spec)}: a feature changes type between examples '
                f'(expected { ({n: d.name for n, d in self._dtypes.items()}) }): {e.message}'
            ) from e
        out = {}
        for name, sparse in parsed.items():
            rows = sparse.indices.numpy()[:, 0]
            if rows.size:
                out[name] = (rows, sparse.values.numpy())
        return out

    def _learn_types(self, examples: Sequence[bytes]) -> None:
        unknown = [n for n in self._names if n not in self._dtypes]
        for serialized in examples:
            if not unknown:
                return
            features = tf.train.Example.FromString(serialized).features.feature
            for name in [n for n in unknown if n in features]:
                kind = features[name].WhichOneof('kind')
                if kind:
                    self._dtypes[name] = _KINDS[kind]
                    unknown.remove(name)


_KINDS = {'bytes_list': tf.string, 'int64_list': tf.int64, 'float_list': tf.float32}


def transformed_column(value, batch: int) -> Column:
    """(rows, values) of one transformed feature (a dense array, a SparseTensor or a
    RaggedTensor output of the preprocessing signature)."""
    if isinstance(value, tf.SparseTensor):
        return value.indices.numpy()[:, 0], value.values.numpy()
    if isinstance(value, tf.RaggedTensor):
        rows = value.value_rowids().numpy()
        return rows, value.flat_values.numpy()[: rows.size]
    array = np.asarray(value).reshape(batch, -1)
    return np.repeat(np.arange(batch), array.shape[1]), array.reshape(-1)


def columns_for_slicing(names: Sequence[str], raw: Mapping[str, Column]) -> dict[str, Column]:
    """The raw columns of `names` that some example of the batch has (the transformed features
    are not consulted: see the module docstring)."""
    return {name: raw[name] for name in names if name in raw}


def _slice_value(column: str, value) -> object:
    value = value.item() if isinstance(value, np.generic) else value
    if isinstance(value, bytes):
        try:
            return value.decode('utf-8')
        except UnicodeDecodeError as e:
            raise ValueError(f'Found non-UTF8 feature value {value!r} in column "{column}"') from e
    return value


def _matches(value, wanted) -> bool:
    """TFMA's `feature_values` test (`SingleSliceSpec.generate_slices`): the spec's value, typed
    by `_to_type`, equals the feature's value; a text value also matches its bytes."""
    value = value.item() if isinstance(value, np.generic) else value
    if value == wanted:
        return True
    if isinstance(wanted, str):
        return value == wanted.encode()
    return value == str(wanted)


def _distinct(rows: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rows, codes) sorted by row then code, each pair once (TFMA's `np.unique` per example)."""
    pairs = np.unique(np.stack([rows, codes]), axis=1)
    return pairs[0], pairs[1]


def _join(a_rows: np.ndarray, a_codes: np.ndarray, b_rows: np.ndarray, b_codes: np.ndarray, batch):
    """Per row, every pair of a code of `a` and a code of `b` (the product of the row's values);
    both inputs sorted by row."""
    b_count = np.bincount(b_rows, minlength=batch)
    b_start = np.concatenate([[0], np.cumsum(b_count)[:-1]])
    repeat = b_count[a_rows]
    a_index = np.repeat(np.arange(a_rows.size), repeat)
    offsets = np.arange(a_index.size) - np.repeat(np.cumsum(repeat) - repeat, repeat)
    b_index = b_start[a_rows[a_index]] + offsets
    return a_rows[a_index], a_codes[:, a_index], b_codes[b_index]


def rows_by_slice(
    specs: Sequence[slicer_lib.SingleSliceSpec], columns: Mapping[str, Column], batch: int
) -> dict[SliceKey, np.ndarray]:
    """{slice key: the batch's rows in it}, each row at most once per slice key."""
    parts: dict[SliceKey, list[np.ndarray]] = {}
    all_rows = np.arange(batch)
    for spec in specs:
        if spec.is_overall():
            parts.setdefault((), []).append(all_rows)
            continue
        rows = all_rows
        for key, wanted in spec._value_matches:  # pylint: disable=protected-access
            if key not in columns:
                rows = all_rows[:0]
                break
            column_rows, values = columns[key]
            distinct = np.unique(values)
            hits = [v for v in distinct.tolist() if _matches(v, wanted)]
            if not hits:
                rows = all_rows[:0]
                break
            matched = column_rows[np.isin(values, np.asarray(hits, dtype=values.dtype))]
            rows = np.intersect1d(rows, matched)
        keys = sorted(spec._columns)  # pylint: disable=protected-access
        if rows.size and any(k not in columns for k in keys):
            rows = all_rows[:0]
        if not rows.size:
            continue
        # (rows, codes per column), codes indexing each column's distinct values.
        uniques = []
        joined_rows, joined = rows, np.zeros((0, rows.size), dtype=np.int64)
        for key in keys:
            column_rows, values = columns[key]
            distinct, codes = np.unique(values, return_inverse=True)
            uniques.append(distinct)
            keep = np.isin(column_rows, joined_rows)
            c_rows, c_codes = _distinct(column_rows[keep], codes.reshape(-1)[keep])
            joined_rows, joined, new = _join(joined_rows, joined, c_rows, c_codes, batch)
            joined = np.vstack([joined, new[None, :]])
        if not joined_rows.size:
            continue
        if not keys:
            combos, inverse = np.zeros((0, 1), dtype=np.int64), np.zeros(joined_rows.size, int)
        else:
            combos, inverse = np.unique(joined, axis=1, return_inverse=True)
        inverse = inverse.reshape(-1)
        order = np.argsort(inverse, kind='stable')
        bounds = np.searchsorted(inverse[order], np.arange(combos.shape[1] + 1))
        for index in range(combos.shape[1]):
            pairs = [
                (key, _slice_value(key, uniques[k][combos[k, index]])) for k, key in enumerate(keys)
            ]
            slice_key = tuple(sorted(list(spec._value_matches) + pairs))  # pylint: disable=protected-access
            parts.setdefault(slice_key, []).append(
                joined_rows[order[bounds[index] : bounds[index + 1]]]
            )
    return {
        key: rows[0] if len(rows) == 1 else np.unique(np.concatenate(rows))
        for key, rows in parts.items()
    }
