"""The one config loader: types, nested sections, unknown and missing fields, file errors."""

from __future__ import annotations

import dataclasses

import pytest

from asynctrain.components.shared import yaml_config


@dataclasses.dataclass(frozen=True)
class _Inner:
    size: int = 1
    ratio: float = 0.5

    def __post_init__(self):
        if self.size < 1:
            yaml_config.fail('outer.inner.size', f'got {self.size}; allowed: values >= 1')


@dataclasses.dataclass(frozen=True)
class _Outer:
    name: str
    inner: _Inner = dataclasses.field(default_factory=_Inner)
    tags: tuple[str, ...] = ()
    limit: float | None = None
    positive: str | int | None = None


def test_builds_nested_frozen_dataclasses_with_tuples():
    built = yaml_config.build(
        _Outer, {'name': 'a', 'inner': {'size': 3, 'ratio': 2}, 'tags': ['x', 'y']}, 'outer'
    )
    assert built == _Outer(name='a', inner=_Inner(size=3, ratio=2), tags=('x', 'y'))
    assert built.tags == ('x', 'y')
    hash(built)
    assert yaml_config.build(_Outer, built) is built
    assert yaml_config.build(_Outer, yaml_config.to_dict(built), 'outer') == built
    assert yaml_config.to_dict(built)['tags'] == ['x', 'y']


@pytest.mark.parametrize(
    'data, message',
    [
        ({'name': 'a', 'inner': {'size': 'big'}}, "outer.inner.size: expected int, got 'big'"),
        ({'name': 'a', 'inner': {'size': True}}, 'outer.inner.size: expected int, got True'),
        ({'name': 'a', 'inner': {'sise': 2}}, "outer.inner.sise: unknown field; allowed: ['ratio'"),
        ({'name': 'a', 'inner': {'size': 0}}, 'outer.inner.size: got 0; allowed: values >= 1'),
        ({'name': 'a', 'inner': [1]}, 'outer.inner: expected a mapping, got list'),
        ({'name': 'a', 'tags': 'x'}, 'outer.tags: expected a list, got str'),
        ({'name': 'a', 'tags': ['x', 2]}, 'outer.tags[1]: expected str, got 2'),
        ({'name': 'a', 'limit': 'high'}, "outer.limit: expected float, got 'high'"),
        ({'name': 'a', 'positive': 1.5}, 'outer.positive: expected str or int, got 1.5'),
        ({'inner': {}}, 'outer.name: required field is missing'),
    ],
)
def test_errors_name_the_field_path(data, message):
    with pytest.raises(yaml_config.ConfigError) as error:
        yaml_config.build(_Outer, data, 'outer')
    assert message in str(error.value)


def test_optional_and_union_fields_accept_their_types():
    built = yaml_config.build(_Outer, {'name': 'a', 'limit': 3, 'positive': 'yes'})
    assert (built.limit, built.positive) == (3, 'yes')
    assert yaml_config.build(_Outer, {'name': 'a', 'positive': 1}).positive == 1
    assert yaml_config.build(_Outer, {'name': 'a', 'limit': None}).limit is None


def test_load_names_the_file_in_every_error(tmp_path):
    good = tmp_path / 'good.yaml'
    good.write_text('name: a\ninner: {size: 2}\n')
    assert yaml_config.load(_Outer, str(good)) == _Outer(name='a', inner=_Inner(size=2))
    bad = tmp_path / 'bad.yaml'
    bad.write_text('name: a\ninner: {size: 0}\n')
    with pytest.raises(yaml_config.ConfigError, match=r'bad\.yaml: outer\.inner\.size: got 0'):
        yaml_config.load(_Outer, str(bad))
    with pytest.raises(yaml_config.ConfigError, match=r'absent\.yaml: cannot read the values'):
        yaml_config.load(_Outer, str(tmp_path / 'absent.yaml'), what='values')
    broken = tmp_path / 'broken.yaml'
    broken.write_text('name: [unclosed\n')
    with pytest.raises(yaml_config.ConfigError, match=r'broken\.yaml: not valid YAML'):
        yaml_config.load(_Outer, str(broken))
    listed = tmp_path / 'list.yaml'
    listed.write_text('- a\n')
    with pytest.raises(yaml_config.ConfigError, match=r'list\.yaml: expected a mapping'):
        yaml_config.load(_Outer, str(listed))
    latin = tmp_path / 'latin.yaml'
    latin.write_bytes(b'name: caf\xe9\n')
    with pytest.raises(yaml_config.ConfigError, match=r'latin\.yaml: not UTF-8 text \(byte 9\)'):
        yaml_config.load(_Outer, str(latin))


def test_read_mapping_takes_a_section_when_the_file_has_it(tmp_path):
    path = tmp_path / 'pipeline.yaml'
    path.write_text('pipeline_name: x\ntrainer:\n  warm_start: false\n')
    assert yaml_config.read_mapping(str(path), section='trainer') == {'warm_start': False}
    alone = tmp_path / 'trainer.yaml'
    alone.write_text('warm_start: false\n')
    assert yaml_config.read_mapping(str(alone), section='trainer') == {'warm_start': False}
    empty = tmp_path / 'empty.yaml'
    empty.write_text('')
    assert yaml_config.read_mapping(str(empty)) == {}


def test_yaml_is_loaded_safely(tmp_path):
    path = tmp_path / 'evil.yaml'
    path.write_text('name: !!python/object/apply:os.system ["echo pwned"]\n')
    with pytest.raises(yaml_config.ConfigError, match='not valid YAML'):
        yaml_config.load(_Outer, str(path))
