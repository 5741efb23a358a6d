"""The Evaluator's batch slicing against TFMA's own slicer applied example by example.

A batch of hand-made examples covers each case TFMA's `SingleSliceSpec.generate_slices` has: a
feature missing from some examples, several values in one example (the product of the values),
`feature_values` given as text for an int feature, a float feature, a spec with only feature
values, two specs that yield the same slice key, and a transformed feature that hides the raw
feature of the same name.
"""

import numpy as np
import pytest
import tensorflow as tf
from tensorflow_model_analysis.proto import config_pb2
from tensorflow_model_analysis.slicer import slice_accessor, slicer_lib

from asynctrain.components.evaluator import slicing

ROWS = [
    {'payment': [b'Cash'], 'hour': [3], 'company': [b'A', b'B'], 'fare': [2.5]},
    {'payment': [b'Card'], 'hour': [3], 'company': [b'A'], 'fare': [0.1]},
    {'hour': [7], 'company': [b'B', b'B'], 'fare': [2.5]},
    {'payment': [b'Cash'], 'company': [], 'fare': [0.1]},
    {'payment': [b'Cash', b'Card'], 'hour': [7]},
]
SPECS = [
    config_pb2.SlicingSpec(),
    config_pb2.SlicingSpec(feature_keys=['payment']),
    config_pb2.SlicingSpec(feature_keys=['payment', 'company']),
    config_pb2.SlicingSpec(feature_keys=['company'], feature_values={'hour': '3'}),
    config_pb2.SlicingSpec(feature_values={'payment': 'Cash'}),
    config_pb2.SlicingSpec(feature_keys=['fare']),
    config_pb2.SlicingSpec(feature_keys=['hour']),
    # The same keys as `hour` for hour 7: an example is counted once per key.
    config_pb2.SlicingSpec(feature_values={'hour': '7'}),
    config_pb2.SlicingSpec(feature_keys=['absent']),
]
KINDS = {
    'payment': 'bytes_list',
    'company': 'bytes_list',
    'hour': 'int64_list',
    'fare': 'float_list',
}


def _serialized():
    out = []
    for row in ROWS:
        example = tf.train.Example()
        for name, values in row.items():
            getattr(example.features.feature[name], KINDS[name]).value.extend(values)
        out.append(example.SerializeToString())
    return out


def _tfma_rows(specs, features_per_row, transformed_per_row=None):
    """{slice key: rows} by TFMA's slicer, one example at a time (as its extractor does)."""
    out = {}
    for index, features in enumerate(features_per_row):
        dicts = [transformed_per_row[index]] if transformed_per_row else []
        accessor = slice_accessor.SliceAccessor(dicts, features)
        keys = {key for spec in specs for key in spec.generate_slices(accessor)}
        for key in keys:
            out.setdefault(key, []).append(index)
    return out


def _ours(specs, columns):
    return {
        k: sorted(v.tolist()) for k, v in slicing.rows_by_slice(specs, columns, len(ROWS)).items()
    }


def _raw_features_per_row():
    dtype = {'bytes_list': object, 'int64_list': np.int64, 'float_list': np.float32}
    return [
        {name: np.array(values, dtype=dtype[KINDS[name]]) for name, values in row.items()}
        for row in ROWS
    ]


def test_slices_of_a_batch_are_tfmas():
    specs = slicing.slice_specs(config_pb2.EvalConfig(slicing_specs=SPECS))
    columns = slicing.RawFeatureParser(slicing.feature_names(specs)).parse(_serialized())
    ours = _ours(specs, columns)
    assert ours == _tfma_rows(specs, _raw_features_per_row())
    # What TFMA yields, spelled out for the cases above.
    assert ours[(('payment', 'Cash'),)] == [0, 3, 4]
    assert ours[(('company', 'A'), ('payment', 'Cash'))] == [0]
    assert ours[(('company', 'B'), ('hour', 3))] == [0]
    assert ours[(('hour', 7),)] == [2, 4]
    assert ours[(('fare', float(np.float32(0.1))),)] == [1, 3]
    assert not any(key and key[0][0] == 'absent' for key in ours)


def test_slices_are_raw_values_where_tfma_takes_the_transformed_ones_and_cross_specs_add_theirs():
    # The preprocessing signature outputs `hour` (bucketized): TFMA would slice on that; ours
    # slices the raw hour, what the configuration names. The cross spec's comparison spec
    # (`company`) is sliced too.
    eval_config = config_pb2.EvalConfig(
        slicing_specs=[config_pb2.SlicingSpec(feature_keys=['hour'])],
        cross_slicing_specs=[
            config_pb2.CrossSlicingSpec(
                baseline_spec=config_pb2.SlicingSpec(),
                slicing_specs=[config_pb2.SlicingSpec(feature_keys=['company'])],
            )
        ],
    )
    specs = slicing.slice_specs(eval_config)
    assert specs == [
        slicer_lib.SingleSliceSpec(columns=['hour']),
        slicer_lib.SingleSliceSpec(),
        slicer_lib.SingleSliceSpec(columns=['company']),
    ]
    raw = slicing.RawFeatureParser(slicing.feature_names(specs)).parse(_serialized())
    ours = _ours(specs, slicing.columns_for_slicing(slicing.feature_names(specs), raw))
    assert ours == _tfma_rows(specs, _raw_features_per_row())
    transformed = [{'hour': np.array([h], dtype=np.int64)} for h in (1, 1, 2, 0, 2)]
    tfma_on_transformed = _tfma_rows(specs, _raw_features_per_row(), transformed)
    assert tfma_on_transformed[(('hour', 2),)] == [2, 4]
    assert (('hour', 2),) not in ours
    assert ours[(('hour', 3),)] == [0, 1] and ours[(('hour', 7),)] == [2, 4]
    assert ours[(('company', 'B'),)] == [0, 2]


def test_min_slice_size_is_accepted_and_refused_only_with_cross_slices():
    config = config_pb2.EvalConfig(
        slicing_specs=[config_pb2.SlicingSpec(feature_keys=['hour'])],
        options=config_pb2.Options(min_slice_size={'value': 5}),
    )
    assert slicing.slice_specs(config) == [slicer_lib.SingleSliceSpec(columns=['hour'])]
    config.cross_slicing_specs.add(baseline_spec=config_pb2.SlicingSpec())
    with pytest.raises(ValueError, match=r'options.min_slice_size: not supported with cross'):
        slicing.slice_specs(config)


def test_a_feature_that_changes_type_is_refused_by_name():
    parser = slicing.RawFeatureParser(['hour'])
    parser.parse(_serialized())
    example = tf.train.Example()
    example.features.feature['hour'].bytes_list.value.append(b'seven')
    with pytest.raises(ValueError, match=r"slice features \['hour'\]: a feature changes type"):
        parser.parse([example.SerializeToString()])
