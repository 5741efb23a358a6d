"""Pre-batched records: what is written reads back as the same examples; records hold many
examples column by column, in a shuffled order that a seed fixes; training batches are full and
drawn across records; the Trainer's data module reads the format through its usual entry point."""

import glob
import os

import numpy as np
import pytest
import tensorflow as tf

from asynctrain.components.shared import columnar_records, shuffled_shards
from asynctrain.components.trainer import config as config_lib
from asynctrain.components.trainer.training import data
from tests.components.example_batcher.batcher_testdata import (
    FEATURE_SPEC,
    LABEL_KEY,
    columns,
    write_examples,
)


def _write(tmp_path, count, examples_per_record, num_files=3, seed=0, name='batched'):
    # The source is written once: the layout is a function of the bytes read.
    source = str(tmp_path / 'source' / '*.gz')
    if not glob.glob(source):
        write_examples(str(tmp_path / 'source'), count)
    out = str(tmp_path / name / 'Split-train')
    metadata = columnar_records.write_split(
        source, FEATURE_SPEC, out, examples_per_record, num_files, seed
    )
    return metadata, os.path.join(out, '*.gz')


def _file_ids(pattern) -> list[list[list[int]]]:
    """The ids of each file's records, files in name order."""
    return [
        [
            list(tf.train.Example.FromString(r.numpy()).features.feature['id'].int64_list.value)
            for r in tf.data.TFRecordDataset(f, compression_type='GZIP')
        ]
        for f in sorted(glob.glob(pattern))
    ]


def _source_hashes(source_pattern, seed) -> dict[int, int]:
    """Each source example's id and its seeded hash, computed from its serialized bytes."""
    serialized = [
        r.numpy()
        for r in tf.data.TFRecordDataset(sorted(glob.glob(source_pattern)), compression_type='GZIP')
    ]
    hashes = shuffled_shards.example_hashes(tf.constant(serialized), seed).numpy()
    ids = [
        tf.train.Example.FromString(s).features.feature['id'].int64_list.value[0]
        for s in serialized
    ]
    return dict(zip(ids, hashes.tolist()))


def _concat(batches) -> dict[str, np.ndarray]:
    features = {
        name: np.concatenate([f[name].numpy() for f, _ in batches]) for name in batches[0][0]
    }
    features[LABEL_KEY] = np.concatenate([label.numpy() for _, label in batches])
    return features


def test_round_trip_reads_back_every_source_example_with_its_values(tmp_path):
    metadata, pattern = _write(tmp_path, 1000, examples_per_record=64)

    per_file = [sum(len(r) for r in records) for records in _file_ids(pattern)]
    assert sum(per_file) == 1000 and len(per_file) == 3 and min(per_file) > 250
    assert metadata['examples'] == 1000 and metadata['files'] == 3
    assert metadata['records'] == sum(-(-n // 64) for n in per_file)
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


def test_each_file_holds_the_examples_its_seeded_hash_picks_in_hash_order(tmp_path):
    _, pattern = _write(tmp_path, 1000, examples_per_record=64, num_files=3, seed=5)
    hashes = _source_hashes(str(tmp_path / 'source' / '*.gz'), seed=5)
    assert len(set(hashes.values())) == 1000
    for shard, records in enumerate(_file_ids(pattern)):
        # Whole records but the file's last, which holds the rest.
        assert [len(r) for r in records[:-1]] == [64] * (len(records) - 1)
        assert 1 <= len(records[-1]) <= 64
        ids = [i for r in records for i in r]
        want = sorted((h, i) for i, h in hashes.items() if h % 3 == shard)
        assert ids == [i for _, i in want]


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


def test_a_split_larger_than_a_shard_is_spilled_and_writes_the_same_bytes(tmp_path, monkeypatch):
    # 1000 examples in two source files of about 4 KB each. Written in memory, then with shards
    # of 2 KB of source: spilled to local disk, the same files byte for byte.
    source = write_examples(str(tmp_path / 'source'), 1000)
    source_bytes = sum(os.path.getsize(p) for p in glob.glob(source))

    def write(name, num_files=3, seed=0):
        out = str(tmp_path / name / 'Split-train')
        metadata = columnar_records.write_split(source, FEATURE_SPEC, out, 64, num_files, seed)
        return metadata, os.path.join(out, '*.gz')

    def contents(p):
        return [open(f, 'rb').read() for f in sorted(glob.glob(p))]

    _, in_memory = write('in_memory')
    spilled_dirs = []
    real_mkdtemp = shuffled_shards.tempfile.mkdtemp
    monkeypatch.setattr(
        shuffled_shards.tempfile,
        'mkdtemp',
        lambda **kw: spilled_dirs.append(real_mkdtemp(**kw)) or spilled_dirs[-1],
    )
    monkeypatch.setattr(shuffled_shards, 'SHARD_SOURCE_BYTES', 2048)
    metadata, spilled = write('spilled')
    assert len(spilled_dirs) == 1 and not os.path.exists(spilled_dirs[0])
    assert contents(spilled) == contents(in_memory)
    assert (metadata['examples'], metadata['files']) == (1000, 3)
    # By size (num_files=0): one shard per 2 KB of source, at least 8.
    metadata, by_size = write('by_size', num_files=0)
    shards = max(8, -(-source_bytes // 2048))
    assert metadata['files'] == shards == len(glob.glob(by_size))
    per_file = [sum(len(r) for r in records) for records in _file_ids(by_size)]
    assert sum(per_file) == 1000 and metadata['records'] == sum(-(-n // 64) for n in per_file)
    got = _concat(
        list(
            columnar_records.make_batched_dataset(
                by_size, FEATURE_SPEC, LABEL_KEY, batch_size=100, training=False
            )
        )
    )
    order = np.argsort(got['id'])
    for name, values in columns(1000).items():
        np.testing.assert_array_equal(got[name][order], values, err_msg=name)
    _, other = write('other', seed=1)
    assert contents(other) != contents(in_memory)
    assert sorted(os.listdir(os.path.dirname(by_size))) == [
        columnar_records.METADATA_FILE_NAME,
        *(os.path.basename(p) for p in sorted(glob.glob(by_size))),
    ]


def test_more_files_than_examples_leaves_empty_files_that_read_as_nothing(tmp_path):
    metadata, pattern = _write(tmp_path, 10, examples_per_record=4, num_files=16)
    per_file = [sum(len(r) for r in records) for records in _file_ids(pattern)]
    assert len(per_file) == 16 and sum(per_file) == 10 and per_file.count(0) >= 6
    assert (metadata['examples'], metadata['files']) == (10, 16)
    assert metadata['records'] == sum(-(-n // 4) for n in per_file)
    got = _concat(
        list(
            columnar_records.make_batched_dataset(
                pattern, FEATURE_SPEC, LABEL_KEY, batch_size=3, training=False
            )
        )
    )
    np.testing.assert_array_equal(np.sort(got['id']), np.arange(10))
