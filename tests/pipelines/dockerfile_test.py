"""Static checks of the two images, kubeflow/Dockerfile (the TFX 1.16 line) and
kubeflow/Dockerfile.tfx121 (the TFX 1.21 line); no container engine runs here, so neither is built.

Each Dockerfile is parsed into its instructions (continuation lines joined) and checked for what
the cluster relies on: a base that carries the line's Python (and, for 1.16, TFX), the line's lock
installed without resolving, the environment, the Beam SDK harness entrypoint, and a numeric
non-root user equal to the uid the TFJob's pods run as.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import tfx

from asynctrain.components.shared import versions
from asynctrain.components.trainer.kubernetes import tfjob as tfjob_lib
from tests.repository import LOCK_FILES

REPO = Path(__file__).resolve().parents[2]
# Each line's Dockerfile and the lock it installs.
IMAGES = {
    line: (REPO / 'kubeflow' / dockerfile, LOCK_FILES[line])
    for line, dockerfile in (('tfx116', 'Dockerfile'), ('tfx121', 'Dockerfile.tfx121'))
}
LINES = sorted(IMAGES)


def _instructions(line: str) -> list[tuple[str, str]]:
    text = re.sub(r'\\\n', ' ', IMAGES[line][0].read_text())
    result = []
    for row in text.splitlines():
        row = row.strip()
        if row and not row.startswith('#'):
            keyword, _, rest = row.partition(' ')
            result.append((keyword.upper(), ' '.join(rest.split())))
    return result


def _env(line: str) -> dict[str, str]:
    env = {}
    for keyword, rest in _instructions(line):
        if keyword == 'ENV':
            for pair in shlex.split(rest):
                name, _, value = pair.partition('=')
                env[name] = value
    return env


def _lock_text(line: str) -> str:
    return (REPO / IMAGES[line][1]).read_text()


def _locked_version(line: str, package: str) -> str:
    for row in _lock_text(line).splitlines():
        if row.startswith(f'{package}=='):
            return row.split('==')[1].strip()
    raise AssertionError(f'{package} is not pinned in {IMAGES[line][1]}')


def test_the_1_16_image_is_the_official_tfx_image_of_the_locked_tfx():
    froms = [rest for keyword, rest in _instructions('tfx116') if keyword == 'FROM']
    assert froms == ['gcr.io/tfx-oss-public/tfx:1.16.0']
    assert _locked_version('tfx116', 'tfx') == '1.16.0'


def test_the_1_21_image_is_the_locks_python_on_debian_13_with_the_locked_beams_harness():
    """The 1.21 lock is resolved for Python 3.13 (its header names --python-version), and ML
    Metadata / TFDV 1.21 need glibc 2.39: Debian 13 (trixie). The SDK harness is Beam's own image
    for that Python and the locked Beam, copied in as TFX's own image does."""
    assert _locked_version('tfx121', 'tfx') == '1.21.0'
    python = re.search(r'--python-version (\d+\.\d+)', _lock_text('tfx121')).group(1)
    beam = _locked_version('tfx121', 'apache-beam')
    froms = [rest for keyword, rest in _instructions('tfx121') if keyword == 'FROM']
    assert froms == [
        f'apache/beam_python{python}_sdk:{beam} AS beam-harness',
        f'python:{python}-slim-trixie',
    ]
    copies = [rest for keyword, rest in _instructions('tfx121') if keyword == 'COPY']
    assert '--from=beam-harness /opt/apache/beam /opt/apache/beam' in copies
    entrypoints = [rest for keyword, rest in _instructions('tfx121') if keyword == 'ENTRYPOINT']
    assert entrypoints == ['["/opt/apache/beam/boot"]']
    runs = [rest for keyword, rest in _instructions('tfx121') if keyword == 'RUN']
    assert f'assert sys.version_info[:2] == ({python.replace(".", ", ")})' in runs[0]


def test_the_installed_tfx_is_the_one_its_lines_image_installs():
    assert tfx.__version__ == _locked_version(versions.LINE, 'tfx')


@pytest.mark.parametrize('line', LINES)
def test_installs_the_lock_without_resolving_then_the_project_without_dependencies(line):
    instructions = _instructions(line)
    lock = IMAGES[line][1]
    runs = [rest for keyword, rest in instructions if keyword == 'RUN']
    lock_install = next(i for i, r in enumerate(runs) if f'-r {lock}' in r)
    project_install = next(
        i
        for i, r in enumerate(runs)
        if re.search(r'pip install --no-deps (--editable )?\.(\s|$)', r)
    )
    assert '--no-deps' in runs[lock_install]
    assert lock_install < project_install
    # The build context's copies (not those from another image): the lock in its own layer first,
    # before the code, and every path they copy exists in the repository.
    copies = [rest for keyword, rest in instructions if keyword == 'COPY' and '--from=' not in rest]
    assert copies[0] == f'{lock} ./'
    for copy in copies:
        for source in copy.split()[:-1]:
            assert (REPO / source).exists(), source
    # The console script the TFJob runs is smoke-tested in the build, and the schemas the
    # pipeline reads sit where asynctrain/pipelines/config.py looks for them.
    assert 'asynctrain --help' in runs[project_install]
    assert "(c.BUNDLED_SCHEMAS / 'taxi').is_dir()" in runs[project_install]


@pytest.mark.parametrize('line', LINES)
def test_sets_legacy_keras_and_puts_the_venv_first_on_path(line):
    env = _env(line)
    assert env['TF_USE_LEGACY_KERAS'] == '1'
    assert env['GRPC_FAIL_FAST'] == 'use_caller'
    assert env['PATH'].startswith(env['VIRTUAL_ENV'] + '/bin:')


@pytest.mark.parametrize('line', LINES)
def test_runs_as_a_numeric_non_root_user_matching_the_tfjob_pods(line):
    instructions = _instructions(line)
    keywords = [keyword for keyword, _ in instructions]
    last_user = len(keywords) - 1 - keywords[::-1].index('USER') if 'USER' in keywords else None
    assert last_user is not None, 'no USER instruction: the image would run as root'
    uid, _, gid = instructions[last_user][1].partition(':')
    assert uid.isdigit() and gid.isdigit(), 'numeric, so Kubernetes can check runAsNonRoot'
    assert int(uid) != 0 and int(gid) != 0
    assert int(uid) == tfjob_lib._NON_ROOT_UID
    # Nothing runs or is installed after switching to that user.
    assert set(keywords[last_user + 1 :]) <= {'ENV', 'LABEL', 'WORKDIR'}


@pytest.mark.parametrize('line', LINES)
def test_is_a_beam_sdk_harness_image_that_runs_the_sdk_in_the_locked_venv(line):
    """Distributed Beam runners start this image as their Python SDK worker
    (`--sdk_container_image`). Its entrypoint is Beam's Python boot (the TFX base image's on
    1.16, kept; set from the copied harness on 1.21); Beam's sdks/python/container/boot.go
    creates a new virtual environment for the SDK unless RUN_PYTHON_SDK_IN_DEFAULT_ENVIRONMENT is
    set, and that environment would not see /opt/venv."""
    instructions = _instructions(line)
    entrypoints = [rest for keyword, rest in instructions if keyword == 'ENTRYPOINT']
    assert entrypoints in ([], ['["/opt/apache/beam/boot"]']), 'the boot entrypoint'
    assert 'CMD' not in [keyword for keyword, _ in instructions]
    env = _env(line)
    assert env['RUN_PYTHON_SDK_IN_DEFAULT_ENVIRONMENT'] == '1'
    # The boot runs `python` from PATH: the venv's, where the lock and this project are.
    assert env['PATH'].split(':')[0] == env['VIRTUAL_ENV'] + '/bin'
