"""Pre-batched records: what is written reads back as the same examples; records hold many
examples column by column, in a shuffled order that a seed fixes; training batches are full and
drawn across records; the Trainer's data module reads the format through its usual entry point."""

import glob
import os

import numpy as np
import pytest
import tensorflow as tf

from asynctrain.components.shared import columnar_records
from asynctrain.components.trainer import config as config_lib
from asynctrain.components.trainer.training import data
from tests.components.example_batcher.batcher_testdata import (
    FEATURE_SPEC,
    LABEL_KEY,
    columns,
    write_examples,
)


def _write(tmp_path, count, examples_per_record, num_files=3, seed=0, name='batched'):
    source = write_examples(str(tmp_path / 'source'), count)
    out = str(tmp_path / name / 'Split-train')
    metadata = columnar_records.write_split(
        source, FEATURE_SPEC, out, examples_per_record, num_files, seed
    )
    return metadata, os.path.join(out, '*.gz')


def _concat(batches) -> dict[str, np.ndarray]:
    features = {
        name: np.concatenate([f[name].numpy() for f, _ in batches]) for name in batches[0][0]
    }
    features[LABEL_KEY] = np.concatenate([label.numpy() for _, label in batches])
    return features


def test_round_trip_reads_back_every_source_example_with_its_values(tmp_path):
    metadata, pattern = _write(tmp_path, 1000, examples_per_record=64)

    assert metadata['examples'] == 1000 and metadata['records'] == 16 and metadata['files'] == 3
    assert metadata['format'] == columnar_records.FORMAT
    assert metadata['bytes'] == sum(os.path.getsize(p) for p in glob.glob(pattern))
    assert columnar_records.is_batched(pattern)
    assert not columnar_records.is_batched(str(tmp_path / 'source' / '*.gz'))
    dataset = columnar_records.make_batched_dataset(
        pattern, FEATURE_SPEC, LABEL_KEY, batch_size=300, training=False
    )
    batches = list(dataset)
    assert [len(label) for _, label in batches] == [300, 300, 300, 100]
    got = _concat(batches)
    order = np.argsort(got['id'])
    want = columns(1000)
    for name, values in want.items():
        assert got[name].dtype == values.dtype or got[name].dtype == object, name
        np.testing.assert_array_equal(got[name][order], values, err_msg=name)
    assert got['company'].shape == (1000, 1) and got['pickup'].shape == (1000, 2)


def test_records_hold_many_examples_column_by_column_in_a_seeded_shuffled_order(tmp_path):
    metadata, pattern = _write(tmp_path, 1000, examples_per_record=64)
    files = sorted(glob.glob(pattern))
    first = tf.train.Example.FromString(
        next(iter(tf.data.TFRecordDataset(files[0], compression_type='GZIP'))).numpy()
    )
    ids = list(first.features.feature['id'].int64_list.value)
    assert len(ids) == 64 and len(set(ids)) == 64
    # The ids are shuffled across the whole split, not a run of neighbours.
    assert ids != sorted(ids) and max(ids) - min(ids) > 500
    assert list(first.features.feature['pickup'].float_list.value[:2]) == [ids[0] * 0.5, -ids[0]]
    _, same_seed = _write(tmp_path, 1000, 64, seed=0, name='again')
    _, other_seed = _write(tmp_path, 1000, 64, seed=1, name='other')

    def contents(p):
        return [open(f, 'rb').read() for f in sorted(glob.glob(p))]

    assert contents(same_seed) == contents(pattern)
    assert contents(other_seed) != contents(pattern)


def test_training_batches_are_full_and_drawn_across_records(tmp_path):
    # 20 records of 50; a shuffle buffer of the whole split: the first 10 batches of 100 are one
    # epoch, every example exactly once, each batch mixing many records.
    _, pattern = _write(tmp_path, 1000, examples_per_record=50, num_files=4)
    record_of = {}
    for f in glob.glob(pattern):
        for index, serialized in enumerate(tf.data.TFRecordDataset(f, compression_type='GZIP')):
            example = tf.train.Example.FromString(serialized.numpy())
            for i in example.features.feature['id'].int64_list.value:
                record_of[i] = (f, index)
    dataset = columnar_records.make_batched_dataset(
        pattern, FEATURE_SPEC, LABEL_KEY, batch_size=100, training=True, shuffle_buffer=1000
    )
    assert dataset.element_spec[1].shape.as_list() == [None]
    batches = list(dataset.take(12))
    assert [len(label) for _, label in batches] == [100] * 12
    epoch = np.concatenate([f['id'].numpy() for f, _ in batches[:10]])
    np.testing.assert_array_equal(np.sort(epoch), np.arange(1000))
    records_per_batch = [len({record_of[i] for i in f['id'].numpy()}) for f, _ in batches]
    assert min(records_per_batch) >= 10, records_per_batch
    for features, label in batches:
        np.testing.assert_array_equal(label.numpy(), features['id'].numpy() % 2)


@pytest.mark.parametrize('cache', config_lib.CACHE_MODES)
def test_trainer_data_module_reads_the_batched_split(tmp_path, cache):
    _, pattern = _write(tmp_path, 1000, examples_per_record=64)
    config = config_lib.InputConfig(cache=cache, shuffle_buffer=512)
    eval_batches = list(
        data.make_dataset(
            pattern,
            FEATURE_SPEC,
            LABEL_KEY,
            256,
            config,
            training=False,
            cache_path=str(tmp_path / 'eval_cache'),
        )
    )
    assert [len(label) for _, label in eval_batches] == [256, 256, 256, 232]
    np.testing.assert_array_equal(np.sort(_concat(eval_batches)['id']), np.arange(1000))
    train = data.make_dataset(
        pattern,
        FEATURE_SPEC,
        LABEL_KEY,
        256,
        config,
        training=True,
        cache_path=str(tmp_path / 'train_cache'),
    )
    assert train.element_spec == data.element_spec(FEATURE_SPEC, LABEL_KEY)
    ids = np.concatenate([f['id'].numpy() for f, _ in train.take(8)])
    # Two epochs' worth: every example at most twice, nearly all at least once.
    counts = np.bincount(ids, minlength=1000)
    assert counts.max() <= 3 and (counts > 0).sum() > 900


def test_label_moments_match_on_the_batched_split(tmp_path):
    _, pattern = _write(tmp_path, 1000, examples_per_record=64)
    source = str(tmp_path / 'source' / '*.gz')
    spec = FEATURE_SPEC['fare']
    batched = data.label_moments(pattern, 'fare', spec)
    plain = data.label_moments(source, 'fare', spec)
    assert batched[0] == plain[0] == 1000
    assert batched[1] == pytest.approx(plain[1]) and batched[2] == pytest.approx(plain[2])
    assert batched[1] == pytest.approx(999 * 0.25 / 2)


def test_a_feature_without_a_fixed_shape_is_refused_by_name(tmp_path):
    source = write_examples(str(tmp_path / 'source'), 10)
    spec = dict(FEATURE_SPEC, fare=tf.io.VarLenFeature(tf.float32))
    with pytest.raises(ValueError, match="feature 'fare': expected a FixedLenFeature"):
        columnar_records.write_split(source, spec, str(tmp_path / 'out'))


def test_a_split_larger_than_a_bucket_is_shuffled_through_spilled_buckets(tmp_path):
    # 1000 examples in two source files of about 4 KB each; 2 KB per bucket: several buckets
    # spilled to disk, then written bucket after bucket, records of 64 spanning buckets.
    source = write_examples(str(tmp_path / 'source'), 1000)
    source_bytes = sum(os.path.getsize(p) for p in glob.glob(source))
    buckets = -(-source_bytes // 2048)
    assert buckets >= 3

    def write(name, seed=0):
        out = str(tmp_path / name / 'Split-train')
        metadata = columnar_records.write_split(
            source, FEATURE_SPEC, out, 64, 3, seed, bucket_source_bytes=2048
        )
        return metadata, os.path.join(out, '*.gz')

    metadata, pattern = write('bucketed')
    assert (metadata['examples'], metadata['records'], metadata['files']) == (1000, 16, 3)
    records = [
        tf.train.Example.FromString(r.numpy())
        for f in sorted(glob.glob(pattern))
        for r in tf.data.TFRecordDataset(f, compression_type='GZIP')
    ]
    sizes = [len(r.features.feature['id'].int64_list.value) for r in records]
    assert sorted(sizes) == [40] + [64] * 15
    got = _concat(
        list(
            columnar_records.make_batched_dataset(
                pattern, FEATURE_SPEC, LABEL_KEY, batch_size=100, training=False
            )
        )
    )
    order = np.argsort(got['id'])
    for name, values in columns(1000).items():
        np.testing.assert_array_equal(got[name][order], values, err_msg=name)
    # Shuffled across the whole split: the first record holds ids from all over it.
    first = list(records[0].features.feature['id'].int64_list.value)
    assert max(first) - min(first) > 500 and first != sorted(first)
    # Deterministic per seed; nothing left behind but the records and their metadata.
    _, again = write('again')
    _, other = write('other', seed=1)

    def contents(p):
        return [open(f, 'rb').read() for f in sorted(glob.glob(p))]

    assert contents(again) == contents(pattern)
    assert contents(other) != contents(pattern)
    assert sorted(os.listdir(os.path.dirname(pattern))) == [
        columnar_records.METADATA_FILE_NAME,
        *(os.path.basename(p) for p in sorted(glob.glob(pattern))),
    ]
