"""Packages only tests use, installed beside the venv rather than in it (`VENV/test-only`, from
requirements-test-only.txt, which says why: their presence alone changes what the project's own
processes import)."""

from __future__ import annotations

import contextlib
import importlib
import pathlib
import sys
from collections.abc import Iterator
from types import ModuleType

TEST_ONLY = pathlib.Path(sys.prefix) / 'test-only'


@contextlib.contextmanager
def imported(name: str) -> Iterator[ModuleType]:
    """The test-only package `name`, importable for the block only: afterwards its folder is off
    `sys.path` and what was imported from it is out of `sys.modules`, so no later test of the
    worker (nor the `kubernetes` client's optional import) finds it."""
    if not TEST_ONLY.is_dir():
        raise RuntimeError(
            f'{TEST_ONLY} is missing: `make setup` installs requirements-test-only.txt there '
            '(tools/venv_from_lock.sh)'
        )
    folder = str(TEST_ONLY)
    sys.path.insert(0, folder)
    try:
        yield importlib.import_module(name)
    finally:
        sys.path.remove(folder)
        for module_name, module in list(sys.modules.items()):
            if (getattr(module, '__file__', None) or '').startswith(folder + '/'):
                del sys.modules[module_name]
