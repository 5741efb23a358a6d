"""The wheel as a user installs it: `pip install asynctrain` works outside the checkout.

Builds the wheel from the project's own files, checks that it installs no top-level name but
`asynctrain` and that it carries the bundled data and the test kit (`asynctrain.testing`, whose
local Spark cluster finds its Maven pom through the package), installs it into a fresh virtual
environment outside the checkout (the lock of the line under test, then the wheel without
dependencies, as the image does), and from a temporary directory outside the checkout runs:

- `asynctrain run` on the bundled data (TFX's taxi sample, our bundled `taxi` schema and feature
  config: package data found through the package), trained briefly; it must exit 0 and push a
  model;
- `asynctrain init` on a CSV copied there (datasets/diabetes); it must exit 0 and write the
  schema, the feature config and the pipeline config.

uv's cache makes the environment a matter of seconds (its files are links into the cache); the
run takes a few minutes.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import zipfile

import pytest
import yaml

from asynctrain.testing.spark import jars
from tests.repository import REPO_ROOT, lock_file

# One pytest-xdist worker for the module: its module-scoped fixtures are built once.
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group('packaging.wheel_test')]

UV = os.path.join(os.path.dirname(sys.executable), 'uv')
# What a wheel is built from: the package and the files pyproject.toml names.
SOURCES = ('pyproject.toml', 'README.md', 'LICENSE', 'asynctrain')
TIMEOUT_SECONDS = 900


def _run(command: list[str], cwd: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT_SECONDS
    )


def _checked(done: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert done.returncode == 0, f'{done.args}:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}'
    return done


@pytest.fixture(scope='module')
def wheel(tmp_path_factory) -> str:
    """The project's wheel, built from a copy of its sources (the build writes `build/` and
    egg-info beside what it builds; the checkout stays untouched)."""
    source = tmp_path_factory.mktemp('source')
    for name in SOURCES:
        path = REPO_ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns('__pycache__'))
        else:
            shutil.copy(path, source / name)
    out = tmp_path_factory.mktemp('dist')
    _checked(
        _run(
            [
                UV,
                'build',
                '--wheel',
                '--python',
                sys.executable,
                '--out-dir',
                str(out),
                str(source),
            ],
            cwd=str(source),
        )
    )
    (built,) = glob.glob(str(out / '*.whl'))
    return built


@pytest.fixture(scope='module')
def installed(wheel, tmp_path_factory) -> str:
    """A fresh virtual environment outside the checkout: the lock, then the wheel; its bin/."""
    venv = tmp_path_factory.mktemp('venv') / 'env'
    cwd = str(venv.parent)
    _checked(_run([UV, 'venv', '--quiet', '--python', sys.executable, str(venv)], cwd=cwd))
    python = str(venv / 'bin' / 'python')
    lock = str(lock_file())  # this line's
    # Compiled at install, as `pip install` compiles by default: without it, where
    # PYTHONDONTWRITEBYTECODE is set (these CI machines), every process of the run below compiled
    # TensorFlow, TFX and Beam from source again (the run: 90.7 s, then 50.4 s; the environment
    # 3.9 s, then 39.5 s; one run each beside a busy CI lane).
    _checked(
        _run(
            [UV, 'pip', 'sync', '--quiet', '--compile-bytecode', '--python', python, lock], cwd=cwd
        )
    )
    _checked(
        _run([UV, 'pip', 'install', '--quiet', '--no-deps', '--python', python, wheel], cwd=cwd)
    )
    return str(venv / 'bin')


def _user_env() -> dict:
    """This environment without anything that would lead Python back to the checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'VIRTUAL_ENV')}
    env['TF_USE_LEGACY_KERAS'] = '1'
    return env


def test_the_wheel_installs_only_asynctrain_with_its_data(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()

    assert {name.split('/')[0] for name in names} == {'asynctrain', 'asynctrain-0.1.0.dist-info'}
    assert {
        'asynctrain/schemas/taxi/schema.pbtxt',
        'asynctrain/schemas/taxi/features.yaml',
        'asynctrain/kubeflow/tfjob-values.yaml',
        'asynctrain/__main__.py',
        # The test kit ships too: users run the local Spark cluster (with its Maven pom) and the
        # comparisons with stock against their own pipelines.
        'asynctrain/testing/__init__.py',
        'asynctrain/testing/spark/cluster.py',
        'asynctrain/testing/spark/job_server/pom.xml',
        'asynctrain/testing/evaluation_outputs.py',
    } <= set(names)


def test_the_installed_package_is_the_wheel_not_the_checkout(installed, tmp_path):
    done = _checked(
        _run(
            [
                os.path.join(installed, 'python'),
                '-c',
                'import asynctrain, asynctrain.pipelines.config as c; '
                'print(asynctrain.__file__); print(c.BUNDLED_SCHEMAS)',
            ],
            cwd=str(tmp_path),
            env=_user_env(),
        )
    )

    package, schemas = done.stdout.split()
    site_packages = os.path.join(os.path.dirname(installed), 'lib')
    assert package.startswith(site_packages) and not package.startswith(str(REPO_ROOT))
    assert schemas == os.path.join(os.path.dirname(package), 'schemas')


def test_the_installed_test_kit_reads_its_spark_pom_from_the_wheel(installed, tmp_path):
    done = _checked(
        _run(
            [
                os.path.join(installed, 'python'),
                '-c',
                'from asynctrain.testing.spark import jars; '
                'print(jars.POM); print(*jars.pom_versions())',
            ],
            cwd=str(tmp_path),
            env=_user_env(),
        )
    )

    pom, spark_version, beam_version = done.stdout.split()
    site_packages = os.path.join(os.path.dirname(installed), 'lib')
    assert pom.startswith(site_packages) and pom.endswith(
        'asynctrain/testing/spark/job_server/pom.xml'
    )
    assert (spark_version, beam_version) == jars.pom_versions()  # the checkout's pom


def test_run_on_the_bundled_data_outside_the_checkout_pushes_a_model(installed, tmp_path):
    config = tmp_path / 'config.yaml'
    config.write_text(yaml.safe_dump({'trainer': {'training': {'train_steps': 150}}}))

    run = _run(
        [os.path.join(installed, 'asynctrain'), 'run', '--config', str(config)],
        cwd=str(tmp_path),
        env=_user_env(),
    )

    assert run.returncode == 0, f'{run.stdout[-4000:]}\n{run.stderr[-4000:]}'
    # The default work directory, ./runs/local, here; the pushed model under the serving folder
    # of the pipeline's own folder of it (the default pipeline_name, asynctrain-taxi).
    serving = tmp_path / 'runs' / 'local' / 'asynctrain-taxi' / 'serving_model'
    pushed = glob.glob(str(serving / '*' / 'saved_model.pb'))
    assert len(pushed) == 1, run.stdout[-4000:]


def test_init_on_a_csv_outside_the_checkout_writes_the_pipeline_files(installed, tmp_path):
    data = tmp_path / 'data'
    shutil.copytree(REPO_ROOT / 'datasets' / 'diabetes' / 'data', data)

    init = _run(
        [
            os.path.join(installed, 'asynctrain'),
            'init',
            '--data',
            str(data),
            '--label',
            'disease_progression',
            '--output',
            'spec',
        ],
        cwd=str(tmp_path),
        env=_user_env(),
    )

    assert init.returncode == 0, f'{init.stdout[-4000:]}\n{init.stderr[-4000:]}'
    spec = tmp_path / 'spec'
    assert {'schema.pbtxt', 'features.yaml', 'config.yaml'} <= set(os.listdir(spec))
    features = yaml.safe_load((spec / 'features.yaml').read_text())
    assert features['label'] == {'column': 'disease_progression', 'task': 'regression'}
    assert 'feature {' in (spec / 'schema.pbtxt').read_text()
    written = yaml.safe_load((spec / 'config.yaml').read_text())
    assert written['evaluation']['metric'] == 'RMSE'
