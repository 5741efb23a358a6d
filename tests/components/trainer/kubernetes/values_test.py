"""Tests for asynctrain/components/trainer/kubernetes/values.py: the TFJob values file and its errors."""

from __future__ import annotations

import pytest
import yaml

from asynctrain.components.shared import yaml_config
from asynctrain.components.trainer.kubernetes import values as values_lib
from tests.components.trainer.kubernetes.kubernetes_testdata import VALUES


@pytest.mark.parametrize(
    'edit, message',
    [
        (lambda v: v['replicas']['Chief'].update(replicas=2), 'replicas.Chief.replicas must be 1'),
        (
            lambda v: v['replicas']['Worker'].update(replicas=0),
            'replicas.Worker.replicas must be an integer >= 1',
        ),
        (
            lambda v: v['replicas']['PS']['resources']['limits'].pop('memory'),
            'replicas.PS.resources.limits.memory must be set',
        ),
        (
            lambda v: v['replicas']['PS'].update(restartPolicy='Sometimes'),
            'replicas.PS.restartPolicy must be one of',
        ),
        (
            lambda v: v['replicas'].pop('PS'),
            "replicas must be exactly the keys ['Chief', 'Worker', 'PS']",
        ),
        (lambda v: v.update(port=0), 'port must be a port number'),
    ],
)
def test_invalid_values_name_the_field(tmp_path, edit, message):
    values = yaml.safe_load(VALUES.read_text())
    edit(values)
    path = tmp_path / 'values.yaml'
    path.write_text(yaml.safe_dump(values))
    with pytest.raises(ValueError, match=message.replace('[', r'\[').replace(']', r'\]')):
        values_lib.load_tfjob_settings(path)


def test_the_repository_values_load_with_the_files_settings():
    settings = values_lib.load_tfjob_settings(VALUES)

    assert (settings.serviceAccountName, settings.port, settings.backoffLimit) == (
        'asynctrain-trainer',
        2222,
        3,
    )
    assert {t: (r.replicas, r.restartPolicy) for t, r in settings.replicas.items()} == {
        'Chief': (1, 'ExitCode'),
        'Worker': (2, 'OnFailure'),
        'PS': (2, 'OnFailure'),
    }
    assert settings.replicas['PS'].resources.limits == {'cpu': '2', 'memory': '16Gi'}
    assert settings.replicas['Worker'].nodeSelector == {'asynctrain.dev/pool': 'training'}
    assert settings.replicas['Worker'].tolerations == ()


@pytest.mark.parametrize(
    'edit, message',
    [
        (
            lambda v: v['replicas']['Worker'].update(replicas='two'),
            "replicas.Worker.replicas: expected int, got 'two'",
        ),
        (
            lambda v: v['replicas']['PS'].update(nodeSelectr={'pool': 'x'}),
            'replicas.PS.nodeSelectr: unknown field',
        ),
        (lambda v: v.pop('backoffLimit'), 'backoffLimit: required field is missing'),
        (lambda v: v.update(backoffLimit=0), 'backoffLimit must be a positive integer, got 0'),
        (
            lambda v: v['replicas']['Chief'].update(tolerations={'key': 'x'}),
            'replicas.Chief.tolerations: expected a list',
        ),
    ],
)
def test_errors_are_config_errors_naming_the_file_and_the_field_path(tmp_path, edit, message):
    values = yaml.safe_load(VALUES.read_text())
    edit(values)
    path = tmp_path / 'values.yaml'
    path.write_text(yaml.safe_dump(values))

    with pytest.raises(yaml_config.ConfigError) as raised:
        values_lib.load_tfjob_settings(path)

    assert str(raised.value).startswith(f'{path}: {message}')


def test_a_missing_values_file_is_a_config_error_naming_it(tmp_path):
    path = tmp_path / 'absent.yaml'
    with pytest.raises(yaml_config.ConfigError) as raised:
        values_lib.load_tfjob_settings(path)
    assert str(raised.value).startswith(f'{path}: cannot read the TFJob values: ')
