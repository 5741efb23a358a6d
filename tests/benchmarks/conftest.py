"""The benches' shared input: the Trainer tests' transformed taxi sample, built once per run."""

import pytest

from tests.components.trainer.trainer_testdata import TransformedData, make_transformed_data
from tests.shared_data import built_once


@pytest.fixture(scope='session')
def transformed_taxi(tmp_path_factory) -> TransformedData:
    """Our `preprocessing_fn`'s output on the bundled taxi sample, laid out as TFX Transform
    writes it: `bench input` and `bench ps` resample it instead of running a Transform of their
    own (the Transform executor runs in `bench transform`'s test). Built under the same name as
    the Trainer tests' `transformed_data`, so one run builds it once for every worker."""
    return built_once(tmp_path_factory, 'taxi', make_transformed_data)
