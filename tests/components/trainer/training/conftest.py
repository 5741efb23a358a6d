"""Session fixtures for the task tests: tiny transformed multiclass and regression datasets."""

import pytest

from tests.components.trainer.training import task_testdata


@pytest.fixture(scope='session')
def multiclass_data(tmp_path_factory) -> task_testdata.TinyData:
    return task_testdata.make(str(tmp_path_factory.mktemp('multiclass')), 'multiclass')


@pytest.fixture(scope='session')
def regression_data(tmp_path_factory) -> task_testdata.TinyData:
    return task_testdata.make(str(tmp_path_factory.mktemp('regression')), 'regression')
