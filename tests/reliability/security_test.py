"""Security checks that run without a cluster: configs load with safe YAML loaders, no module
deserializes or evaluates data, and the paths a config controls stay under the work directory.

The container and the TFJob pods (non-root, no privilege, resource limits) are checked by
`tests/pipelines/dockerfile_test.py` and `tests/components/trainer/tfjob_test.py`.
"""

import ast
import json
import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
SCANNED = ('asynctrain',)
DESERIALIZERS = {'pickle', 'cPickle', 'cloudpickle', 'dill', 'marshal', 'shelve', 'jsonpickle'}


def _payload(sentinel: pathlib.Path) -> str:
    """YAML that, under an unsafe loader, would run a shell command creating `sentinel`."""
    return f'!!python/object/apply:os.system ["touch {sentinel}"]\n'


def test_pipeline_config_refuses_python_object_tag(tmp_path):
    """YAML !!python/object tag in the pipeline config: refused, nothing executed"""
    from asynctrain.components.shared.yaml_config import ConfigError
    from asynctrain.pipelines.config import load_config

    sentinel = tmp_path / 'pwned'
    path = tmp_path / 'config.yaml'
    path.write_text(f'pipeline_name: {_payload(sentinel)}')
    with pytest.raises(ConfigError, match='not valid YAML'):
        load_config(str(path))
    path.write_text(_payload(sentinel))
    with pytest.raises(ConfigError, match='not valid YAML'):
        load_config(str(path))
    assert not sentinel.exists()


def test_feature_config_refuses_python_object_tag(tmp_path):
    """YAML !!python/object tag in features.yaml: refused, nothing executed"""
    from asynctrain.components.shared.yaml_config import ConfigError
    from asynctrain.components.transform.feature_config import load_feature_config

    sentinel = tmp_path / 'pwned'
    path = tmp_path / 'features.yaml'
    path.write_text('label: ' + _payload(sentinel) + 'features: []\n')
    with pytest.raises(ConfigError, match='not valid YAML'):
        load_feature_config(
            str(path), str(REPO / 'asynctrain' / 'schemas' / 'taxi' / 'schema.pbtxt')
        )
    assert not sentinel.exists()


def test_tfjob_values_refuse_python_object_tag(tmp_path):
    """YAML !!python/object tag in the TFJob values file: refused, nothing executed"""
    from asynctrain.components.shared.yaml_config import ConfigError
    from asynctrain.components.trainer.kubernetes.values import load_tfjob_settings

    sentinel = tmp_path / 'pwned'
    values = (REPO / 'asynctrain' / 'kubeflow' / 'tfjob-values.yaml').read_text()
    path = tmp_path / 'values.yaml'
    path.write_text(
        values.replace(
            'serviceAccountName:',
            'serviceAccountName: ' + _payload(sentinel).strip() + '\nunused:',
            1,
        )
    )
    assert 'serviceAccountName: !!python/object/apply' in path.read_text()
    with pytest.raises(ConfigError, match='python/object/apply'):
        load_tfjob_settings(path)
    assert not sentinel.exists()


def _modules():
    for top in SCANNED:
        for path in sorted((REPO / top).rglob('*.py')):
            yield path.relative_to(REPO), ast.parse(path.read_text(encoding='utf-8'))


def _unsafe_uses(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [
                f'import {a.name}' for a in node.names if a.name.split('.')[0] in DESERIALIZERS
            ]
        elif (
            isinstance(node, ast.ImportFrom) and (node.module or '').split('.')[0] in DESERIALIZERS
        ):
            found.append(f'from {node.module} import')
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in ('eval', 'exec', '__import__', 'compile'):
                found.append(f'{func.id}() at line {node.lineno}')
            elif isinstance(func, ast.Attribute):
                owner = func.value.id if isinstance(func.value, ast.Name) else ''
                loader = {k.arg: k.value for k in node.keywords}.get('Loader')
                safe = isinstance(loader, ast.Attribute) and loader.attr in (
                    'SafeLoader',
                    'CSafeLoader',
                )
                if owner == 'yaml' and func.attr in ('unsafe_load', 'full_load', 'load_all') + (
                    () if safe else ('load',)
                ):
                    found.append(f'yaml.{func.attr}() at line {node.lineno}')
                if func.attr in ('read_pickle', 'loads') and owner in ('pd', 'pickle', 'marshal'):
                    found.append(f'{owner}.{func.attr}() at line {node.lineno}')
                if (
                    func.attr == 'load'
                    and owner == 'np'
                    and any(k.arg == 'allow_pickle' for k in node.keywords)
                ):
                    found.append(f'np.load(allow_pickle=...) at line {node.lineno}')
    return found


def test_no_module_deserializes_or_evaluates_data():
    """Source scan of asynctrain/: no pickle, unsafe yaml.load, eval, exec"""
    modules = list(_modules())
    assert len(modules) > 30  # the scan saw the packages
    offenders = {str(path): uses for path, tree in modules if (uses := _unsafe_uses(tree))}
    assert offenders == {}


def test_scan_catches_what_it_looks_for():
    """The source scan itself flags pickle, yaml.load without SafeLoader, eval and exec"""
    tree = ast.parse(
        'import pickle\nimport yaml\nyaml.load(f)\neval(x)\nexec(y)\n'
        'yaml.load(f, Loader=yaml.SafeLoader)\n'
    )
    assert _unsafe_uses(tree) == [
        'import pickle',
        'yaml.load() at line 3',
        'eval() at line 4',
        'exec() at line 5',
    ]


@pytest.mark.parametrize('work_dir', ['runs/local', '../elsewhere/run', '/srv/asynctrain/run'])
def test_work_paths_are_under_the_work_dir(work_dir, monkeypatch, tmp_path):
    """Pipeline root, metadata and serving dir: always inside the configured work directory"""
    from asynctrain.pipelines.config import PipelineConfig

    monkeypatch.chdir(tmp_path)
    config = PipelineConfig(work_dir=work_dir)
    root = os.path.abspath(work_dir)
    for path in (config.pipeline_root, config.metadata_path, config.serving_dir):
        assert os.path.commonpath([root, os.path.abspath(path)]) == root, path


@pytest.mark.integration
def test_every_component_writes_under_the_work_dir(tmp_path):
    """create_pipeline: every output and the pushed model land under the work directory"""
    from asynctrain.pipelines import dataset
    from asynctrain.pipelines.config import PipelineConfig
    from asynctrain.pipelines.pipeline import create_pipeline

    config = PipelineConfig(work_dir=str(tmp_path / 'work'), data=str(tmp_path / 'data'))
    pipeline = create_pipeline(config, dataset.load(config))
    root = str(tmp_path / 'work')
    assert os.path.commonpath([root, pipeline.pipeline_info.pipeline_root]) == root
    pusher = next(c for c in pipeline.components if c.id == 'Pusher')
    destination = pusher.exec_properties['push_destination']
    if isinstance(destination, str):  # the component keeps the proto as JSON
        destination = json.loads(destination)
        base_directory = destination['filesystem'].get(
            'baseDirectory', destination['filesystem'].get('base_directory')
        )
    else:
        base_directory = destination.filesystem.base_directory
    assert base_directory == config.serving_dir
    assert os.path.commonpath([root, config.serving_dir]) == root
    # No component carries its own output path: TFX places every artifact under the root.
    for component in pipeline.components:
        for key, value in component.exec_properties.items():
            if isinstance(value, str) and os.path.isabs(value) and 'dir' in key.lower():
                assert os.path.commonpath([root, value]) == root, (component.id, key, value)
