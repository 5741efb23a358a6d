"""Static checks of kubeflow/Dockerfile; no container engine runs here, so the image is not built.

The Dockerfile is parsed into its instructions (continuation lines joined) and checked for what
the cluster relies on: the TFX 1.16.0 base matching the lock, the locked install, the
environment, and a numeric non-root user equal to the uid the TFJob's pods run as.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import tfx

from asynctrain.components.trainer.kubernetes import tfjob as tfjob_lib

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / 'kubeflow' / 'Dockerfile'


def _instructions() -> list[tuple[str, str]]:
    text = re.sub(r'\\\n', ' ', DOCKERFILE.read_text())
    result = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith('#'):
            keyword, _, rest = line.partition(' ')
            result.append((keyword.upper(), ' '.join(rest.split())))
    return result


def _env() -> dict[str, str]:
    env = {}
    for keyword, rest in _instructions():
        if keyword == 'ENV':
            for pair in shlex.split(rest):
                name, _, value = pair.partition('=')
                env[name] = value
    return env


def _locked_version(package: str) -> str:
    for line in (REPO / 'requirements.lock').read_text().splitlines():
        if line.startswith(f'{package}=='):
            return line.split('==')[1].strip()
    raise AssertionError(f'{package} is not pinned in requirements.lock')


@pytest.mark.only_line(
    'tfx116', "kubeflow/Dockerfile builds the 1.16 line's image; the 1.21 line has none yet"
)
def test_base_is_the_official_tfx_image_of_the_locked_tfx():
    froms = [rest for keyword, rest in _instructions() if keyword == 'FROM']
    assert froms == ['gcr.io/tfx-oss-public/tfx:1.16.0']
    assert _locked_version('tfx') == '1.16.0' == tfx.__version__


def test_installs_the_lock_without_resolving_then_the_project_without_dependencies():
    instructions = _instructions()
    runs = [rest for keyword, rest in instructions if keyword == 'RUN']
    lock_install = next(i for i, r in enumerate(runs) if '-r requirements.lock' in r)
    project_install = next(
        i
        for i, r in enumerate(runs)
        if re.search(r'pip install --no-deps (--editable )?\.(\s|$)', r)
    )
    assert '--no-deps' in runs[lock_install]
    assert lock_install < project_install
    copies = [rest for keyword, rest in instructions if keyword == 'COPY']
    assert copies[0] == 'requirements.lock ./'  # its own layer, before the code
    # Every path the build copies exists in the repository (the build context).
    for copy in copies:
        for source in copy.split()[:-1]:
            assert (REPO / source).exists(), source
    # The console script the TFJob runs is smoke-tested in the build, and the schemas the
    # pipeline reads sit where asynctrain/pipelines/config.py looks for them.
    assert 'asynctrain --help' in runs[project_install]
    assert "(c.BUNDLED_SCHEMAS / 'taxi').is_dir()" in runs[project_install]


def test_sets_legacy_keras_and_puts_the_venv_first_on_path():
    env = _env()
    assert env['TF_USE_LEGACY_KERAS'] == '1'
    assert env['GRPC_FAIL_FAST'] == 'use_caller'
    assert env['PATH'].startswith(env['VIRTUAL_ENV'] + '/bin:')


def test_runs_as_a_numeric_non_root_user_matching_the_tfjob_pods():
    instructions = _instructions()
    keywords = [keyword for keyword, _ in instructions]
    last_user = len(keywords) - 1 - keywords[::-1].index('USER') if 'USER' in keywords else None
    assert last_user is not None, 'no USER instruction: the image would run as root'
    uid, _, gid = instructions[last_user][1].partition(':')
    assert uid.isdigit() and gid.isdigit(), 'numeric, so Kubernetes can check runAsNonRoot'
    assert int(uid) != 0 and int(gid) != 0
    assert int(uid) == tfjob_lib._NON_ROOT_UID
    # Nothing runs or is installed after switching to that user.
    assert set(keywords[last_user + 1 :]) <= {'ENV', 'LABEL', 'WORKDIR'}


def test_is_a_beam_sdk_harness_image_that_runs_the_sdk_in_the_locked_venv():
    """Distributed Beam runners start this image as their Python SDK worker
    (`--sdk_container_image`). The TFX base image's entrypoint is Beam's Python boot; Beam's
    sdks/python/container/boot.go creates a new virtual environment for the SDK unless
    RUN_PYTHON_SDK_IN_DEFAULT_ENVIRONMENT is set, and that environment would not see /opt/venv."""
    keywords = [keyword for keyword, _ in _instructions()]
    assert 'ENTRYPOINT' not in keywords and 'CMD' not in keywords, 'keeps the boot entrypoint'
    env = _env()
    assert env['RUN_PYTHON_SDK_IN_DEFAULT_ENVIRONMENT'] == '1'
    # The boot runs `python` from PATH: the venv's, where the lock and this project are.
    assert env['PATH'].split(':')[0] == env['VIRTUAL_ENV'] + '/bin'
