"""The suite's `xdist_group` marks hold: with `--dist loadgroup` (the Makefile's), a group's tests
run on one pytest-xdist worker, so its module fixtures (a built wheel and its environment, a Spark
cluster) are made once. Under pytest 9 with pytest-xdist 3.8 every mark was silently ignored
(pytest-dev/pytest-xdist#1386); this checks the installed pair, in a pytest of its own."""

from __future__ import annotations

import subprocess
import sys

GROUPED = """
import os
import pytest

pytestmark = pytest.mark.xdist_group('together')


@pytest.mark.parametrize('index', range(8))
def test_grouped(index, tmp_path_factory):
    worker = os.environ['PYTEST_XDIST_WORKER']
    (tmp_path_factory.getbasetemp().parent / f'ran-{index}').write_text(worker)


@pytest.mark.parametrize('index', range(8))
def test_free(index):
    pass
"""


def test_a_groups_tests_run_on_one_worker(tmp_path):
    (tmp_path / 'grouped_test.py').write_text(GROUPED)
    (tmp_path / 'pytest.ini').write_text('[pytest]\n')
    base = tmp_path / 'base'

    done = subprocess.run(
        [
            sys.executable, '-m', 'pytest', '-n', '3', '--dist', 'loadgroup',
            '-p', 'no:randomly', '-p', 'no:cacheprovider', '--basetemp', str(base),
            'grouped_test.py',
        ],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip

    assert done.returncode == 0, done.stdout[-3000:]
    workers = {(base / f'ran-{index}').read_text() for index in range(8)}
    assert len(workers) == 1, f'one group ran on workers {sorted(workers)}'
