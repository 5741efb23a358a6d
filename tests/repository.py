"""The checkout the tests run from: the folders tests read that are not package data (datasets/,
docs/, examples/, kubeflow/). Code under asynctrain/ never looks for these; it finds its own data
through the installed package."""

import os
import pathlib

from asynctrain.components.shared import versions

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
# The lock of each supported line (docs/support.md).
LOCK_FILES = {'tfx116': 'requirements.lock', 'tfx121': 'requirements-tfx121.lock'}


def lock_file() -> pathlib.Path:
    """The lock of the line this interpreter runs."""
    return REPO_ROOT / LOCK_FILES[versions.LINE]


def child_environment() -> dict:
    """This process's environment with the checkout first on `PYTHONPATH`: for a child run as
    `python -m tests....` or `python -m asynctrain....` from this checkout."""
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get('PYTHONPATH')) if p)
    return env
