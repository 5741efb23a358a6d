"""The store through boto3, where the line's TensorFlow cannot open it: local copies pulled and
pushed against a real S3 endpoint (moto's server), and the flags and parameters mirrored."""

from __future__ import annotations

import argparse
import json
import os

import pytest

from asynctrain.components.shared import object_store, versions
from asynctrain.components.trainer import cli
from asynctrain.pipelines.kubeflow.container import kfp_entrypoint


@pytest.fixture
def without_tensorflow_s3(monkeypatch):
    """This test behaves as the 1.21 line, whose TensorFlow has no s3:// filesystem."""
    monkeypatch.setattr(versions, 'HAS_TENSORFLOW_S3', False)


def _put(store, bucket: str, files: dict[str, str]) -> None:
    client = store.client()
    for key, text in files.items():
        client.put_object(Bucket=bucket, Key=key, Body=text.encode())


def _get(store, bucket: str, key: str) -> str:
    return store.client().get_object(Bucket=bucket, Key=key)['Body'].read().decode()


def test_the_endpoint_is_boto3s_else_tensorflow_ios():
    assert object_store.endpoint_url({'AWS_ENDPOINT_URL': 'http://a:1', 'S3_ENDPOINT': 'b:2'}) == (
        'http://a:1'
    )
    assert object_store.endpoint_url({'S3_ENDPOINT': 'b:2', 'S3_USE_HTTPS': '0'}) == 'http://b:2'
    assert object_store.endpoint_url({'S3_ENDPOINT': 'b:2'}) == 'https://b:2'
    assert object_store.endpoint_url({'S3_ENDPOINT': 'http://c:3'}) == 'http://c:3'
    assert object_store.endpoint_url({}) is None


def test_a_uri_without_a_bucket_is_refused_with_the_form_expected():
    with pytest.raises(ValueError, match=r"'s3:///k': expected s3://BUCKET/KEY"):
        object_store.split_uri('s3:///k')
    assert object_store.split_uri('s3://b/k/sub/') == ('b', 'k/sub')


def test_only_a_line_without_tensorflow_s3_mirrors(monkeypatch):
    monkeypatch.setattr(versions, 'HAS_TENSORFLOW_S3', True)
    assert not object_store.needs_mirror('s3://b/k')
    monkeypatch.setattr(versions, 'HAS_TENSORFLOW_S3', False)
    assert object_store.needs_mirror('s3://b/k')
    assert not object_store.needs_mirror('/s3/b/k')


def test_pull_copies_the_folder_alone_and_push_sends_back_only_what_changed(s3_store, tmp_path):
    bucket = s3_store.new_bucket()
    _put(s3_store, bucket, {'d/a.csv': 'a', 'd/sub/b.csv': 'b', 'd2/not-mine.csv': 'x'})
    mirror = object_store.Mirror(root=str(tmp_path / 'mirror'))

    local = mirror.pull(f's3://{bucket}/d')

    assert local == str(tmp_path / 'mirror' / bucket / 'd')
    found = sorted(
        os.path.relpath(os.path.join(r, f), local) for r, _, fs in os.walk(local) for f in fs
    )
    assert found == ['a.csv', 'sub/b.csv']  # `d2/` only shares the prefix.
    assert open(os.path.join(local, 'sub', 'b.csv')).read() == 'b'

    with open(os.path.join(local, 'a.csv'), 'w') as f:
        f.write('changed')
    os.makedirs(os.path.join(local, 'new'))
    with open(os.path.join(local, 'new', 'c.csv'), 'w') as f:
        f.write('c')
    assert mirror.push(f's3://{bucket}/d') == 2
    assert _get(s3_store, bucket, 'd/a.csv') == 'changed'
    assert _get(s3_store, bucket, 'd/new/c.csv') == 'c'
    assert s3_store.keys(f's3://{bucket}/d') == ['a.csv', 'new/c.csv', 'sub/b.csv']
    assert mirror.push(f's3://{bucket}/d') == 0  # Nothing changed since.


def test_pull_of_one_object_is_a_file_and_of_nothing_an_empty_folder(s3_store, tmp_path):
    bucket = s3_store.new_bucket()
    _put(s3_store, bucket, {'run/config.yaml': 'trainer: {}'})
    mirror = object_store.Mirror(root=str(tmp_path))

    path = mirror.pull(f's3://{bucket}/run/config.yaml')
    assert open(path).read() == 'trainer: {}'

    empty = mirror.pull(f's3://{bucket}/serving_model')
    assert os.path.isdir(empty) and os.listdir(empty) == []


def test_single_file_operations_reach_the_store_without_tensorflow(
    s3_store, tmp_path, without_tensorflow_s3
):
    bucket = s3_store.new_bucket()
    model = f's3://{bucket}/model/Format-Serving'
    assert not object_store.contains_saved_model(model)
    object_store.write_text(f'{model}/saved_model.pb', 'graph')
    assert object_store.contains_saved_model(model)

    (tmp_path / 'stats.pb').write_bytes(b'\x00stats')
    object_store.copy(str(tmp_path / 'stats.pb'), f'{model}/assets.extra/stats.pb')
    object_store.copy(f'{model}/assets.extra/stats.pb', str(tmp_path / 'back' / 'stats.pb'))
    assert (tmp_path / 'back' / 'stats.pb').read_bytes() == b'\x00stats'


def _train_args(bucket: str) -> argparse.Namespace:
    root = f's3://{bucket}/root'
    return argparse.Namespace(
        examples=f'{root}/examples',
        transform_graph=f'{root}/transform',
        base_model=None,
        config=f'{root}/model_run/trainer_config.yaml',
        output=None,
        serving_model_dir=f'{root}/model/Format-Serving',
        model_run_dir=f'{root}/model_run',
        label_key='tips',
    )


@pytest.mark.parametrize(
    ('task_type', 'local_flags', 'pushed'),
    [
        (
            'chief',
            ['examples', 'transform_graph', 'config', 'serving_model_dir', 'model_run_dir'],
            2,
        ),
        ('worker', ['examples', 'transform_graph', 'config'], 0),
        ('ps', ['config'], 0),
    ],
)
def test_each_replica_copies_what_its_task_reads_and_only_the_chief_pushes(
    s3_store, tmp_path, monkeypatch, without_tensorflow_s3, task_type, local_flags, pushed
):
    bucket = s3_store.new_bucket()
    _put(
        s3_store,
        bucket,
        {
            'root/examples/Split-train/data.gz': 'records',
            'root/transform/transform_fn/saved_model.pb': 'graph',
            'root/model_run/trainer_config.yaml': 'trainer: {}',
        },
    )
    monkeypatch.setattr(object_store, 'DEFAULT_ROOT', str(tmp_path / 'store'))
    args = _train_args(bucket)
    given = vars(args).copy()

    mirror, outputs = cli._mirror_store_arguments(args, task_type)

    for flag, value in vars(args).items():
        if flag in local_flags:
            assert value == str(tmp_path / 'store' / bucket / given[flag][len(f's3://{bucket}/') :])
        else:
            assert value == given[flag]
    assert open(args.config).read() == 'trainer: {}'
    if 'examples' in local_flags:
        assert os.path.exists(os.path.join(args.examples, 'Split-train', 'data.gz'))
    assert len(outputs) == pushed
    if task_type == 'chief':
        with open(os.path.join(args.model_run_dir, 'checkpoint'), 'w') as f:
            f.write('ckpt')
        assert sum(mirror.push(uri) for uri in outputs) == 1
        assert _get(s3_store, bucket, 'root/model_run/checkpoint') == 'ckpt'


def test_a_step_s_data_folder_and_push_destination_are_pulled_and_named_by_their_copies(
    s3_store, tmp_path, without_tensorflow_s3
):
    bucket = s3_store.new_bucket()
    _put(s3_store, bucket, {'taxi/day1.csv': 'a,b\n1,2\n', 'work/serving/1/saved_model.pb': 'm'})
    destination = json.dumps({'filesystem': {'base_directory': f's3://{bucket}/work/serving'}})
    executor_input = {
        'inputs': {
            'parameterValues': {
                'input_base': f's3://{bucket}/taxi',
                'push_destination': destination,
                'module_path': f's3://{bucket}/not/pulled',
            }
        }
    }
    mirror = object_store.Mirror(root=str(tmp_path))

    pulled = kfp_entrypoint.mirror_parameters(executor_input, mirror)

    values = executor_input['inputs']['parameterValues']
    assert pulled == [f's3://{bucket}/taxi', f's3://{bucket}/work/serving']
    assert values['input_base'] == str(tmp_path / bucket / 'taxi')
    assert open(os.path.join(values['input_base'], 'day1.csv')).read() == 'a,b\n1,2\n'
    base = json.loads(values['push_destination'])['filesystem']['base_directory']
    assert os.path.exists(os.path.join(base, '1', 'saved_model.pb'))
    assert values['module_path'] == f's3://{bucket}/not/pulled'
