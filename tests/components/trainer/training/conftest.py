"""Session fixtures for the task tests: tiny transformed multiclass and regression datasets."""

import functools

import pytest

from tests.components.trainer.training import task_testdata
from tests.shared_data import built_once


@pytest.fixture(scope='session')
def multiclass_data(tmp_path_factory) -> task_testdata.TinyData:
    make = functools.partial(task_testdata.make, task_type='multiclass')
    return built_once(tmp_path_factory, 'multiclass', make)


@pytest.fixture(scope='session')
def regression_data(tmp_path_factory) -> task_testdata.TinyData:
    make = functools.partial(task_testdata.make, task_type='regression')
    return built_once(tmp_path_factory, 'regression', make)
