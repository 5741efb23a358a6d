"""Test-wide setup: the environment every asynctrain entry point sets before TensorFlow loads, a
temporary directory of the suite's own, the order that lets pytest-xdist's workers share the slow
tests, and the one tiny pipeline run that tests reading a run's outputs share."""

import dataclasses
import os
import pathlib
import tempfile
import typing

import pytest

from asynctrain.components.shared import tf_environment, versions

tf_environment.configure()
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

# Tests marked `fresh_process` (those that start TensorFlow servers) run their body in a process of
# their own; any other test that starts a server or connects the eager context is refused.
pytest_plugins = ['tests.fresh_process_plugin']


@pytest.fixture(scope='session', autouse=True)
def _temporary_directory(tmp_path_factory) -> None:
    """Temporary files of the suite and of every process it starts (AutoGraph's generated
    sources, TFX's sdist where a test passes Beam arguments, Beam's and TensorFlow's scratch
    files) go under pytest's base directory, which pytest prunes to its last three runs, rather
    than staying in the system's temporary directory for good."""
    path = str(tmp_path_factory.mktemp('tmp'))
    os.environ['TMPDIR'] = path
    tempfile.tempdir = path


# Each slow file's weight in seconds: its longest test with its fixtures' setup, or, where its tests
# form one xdist group (handed to one worker as a unit), the group's total. From the fresh-clone
# 1.16 run of 2026-12-06 19:45 UTC (three workers on 2 cores, 1,094 tests; runs/test-results.xml).
# The work goes out in this order (`--no-loadscope-reorder`), so starting the longest units first
# keeps a worker from picking one up when the others are nearly done.
SLOWEST_FILES = {
    'tests/e2e/daily_retraining_e2e_test.py': 313,
    'tests/e2e/spark_pipeline_e2e_test.py': 267,
    'tests/e2e/recsys_pipeline_e2e_test.py': 258,
    'tests/benchmarks/pipeline_bench_test.py': 247,
    'tests/e2e/compiled_run_e2e_test.py': 218,
    'tests/benchmarks/parameter_server_bench_test.py': 192,
    'tests/e2e/pipeline_state_e2e_test.py': 183,
    'tests/benchmarks/recsys_bench_test.py': 176,
    'tests/packaging/wheel_test.py': 172,
    'tests/benchmarks/evaluator_bench_test.py': 171,
    'tests/e2e/own_data_e2e_test.py': 108,
    'tests/e2e/local_pipeline_e2e_test.py': 103,
    'tests/benchmarks/transform_bench_test.py': 91,
    'tests/components/transform/transform_component_test.py': 89,
    'tests/components/trainer/cli_test.py': 80,  # its killed worker rejoining (2026-12-07)
    'tests/components/trainer/cluster/recovery_test.py': 79,
    'tests/components/evaluator/equivalence_test.py': 79,
    'tests/e2e/init_e2e_test.py': 76,
    'tests/e2e/pipeline_failure_e2e_test.py': 76,
    'tests/benchmarks/input_pipeline_bench_test.py': 70,
    'tests/testing/spark/cluster_test.py': 62,
    'tests/components/example_gen/parquet_examples_test.py': 61,
    'tests/benchmarks/async_bench_test.py': 53,
    'tests/components/trainer/kubernetes/local_test.py': 52,
    'tests/components/trainer/training/model_module_test.py': 46,
    'tests/components/example_gen/rows_accounted_test.py': 38,
    'tests/components/trainer/executor_test.py': 37,
    'tests/e2e/stock_entrypoint_on_kfp_e2e_test.py': 35,
    'tests/reliability/property_test.py': 32,
    'tests/components/transform/shared_vocabularies_test.py': 30,
    'tests/components/example_gen/equivalence_test.py': 25,
    'tests/components/trainer/training/sharded_tables_test.py': 25,
    'tests/components/transform/datasets_equality_test.py': 24,
    'tests/components/example_batcher/batching_test.py': 19,
}
_ROOT = pathlib.Path(__file__).resolve().parent.parent


def _start_order(item: pytest.Item) -> tuple[int, int]:
    """Slowest known files first, then the e2e tier, the benchmarks, the integration tier."""
    path = item.path.relative_to(_ROOT).as_posix() if item.path.is_relative_to(_ROOT) else ''
    if path in SLOWEST_FILES:
        return 0, -SLOWEST_FILES[path]
    if item.get_closest_marker('e2e'):
        return 1, 0
    if path.startswith('tests/benchmarks/'):
        return 2, 0
    if item.get_closest_marker('integration'):
        return 3, 0
    return 4, 0


def _skip_other_lines(item: pytest.Item) -> None:
    """A test marked `only_line(line, reason)` is skipped, with its reason, on the other line."""
    for marker in item.iter_markers('only_line'):
        line, reason = marker.args
        if line not in typing.get_args(versions.Line):
            raise pytest.UsageError(f"{item.nodeid}: only_line's line is 'tfx116' or 'tfx121'")
        if line != versions.LINE:
            item.add_marker(pytest.mark.skip(reason=f'{line} line only: {reason}'))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        _skip_other_lines(item)
    # A stable sort over pytest-randomly's shuffle (which runs first): the order is random within
    # each tier and reproducible from the seed; tests of one module stay together, so module
    # fixtures are still set up once.
    items.sort(key=_start_order)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """A failed run says how to replay its order."""
    if exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        seed = getattr(config.option, 'randomly_seed', None)
        if seed is not None:
            terminalreporter.write_line(
                f"asynctrain: this run's test order replays with `make test SEED={seed}` "
                f'(or pytest -p randomly --randomly-seed={seed} ...)'
            )


SAMPLE_ROWS = 3000


@dataclasses.dataclass(frozen=True)
class PipelineRun:
    """One finished `asynctrain run` on a small taxi sample.

    Attributes:
      sample_dir: the input folder (`data.csv`: the first SAMPLE_ROWS rows of the bundled CSV).
      config: the run's `PipelineConfig`.
      summary: what `run_local` returned.
    """

    sample_dir: pathlib.Path
    config: object
    summary: object


@pytest.fixture(scope='session')
def taxi_pipeline_run(tmp_path_factory) -> PipelineRun:
    """The default pipeline, trained briefly, run once per test process: for tests that only read
    a run's outputs (a test that reruns the pipeline on it must come after them)."""
    from asynctrain.pipelines.config import load_config
    from asynctrain.pipelines.local_runner import run_local
    from tests.shared_data import write_taxi_sample

    sample_dir = tmp_path_factory.mktemp('taxi_sample')
    write_taxi_sample(sample_dir, SAMPLE_ROWS)
    config = load_config(
        data=str(sample_dir),
        work_dir=str(tmp_path_factory.mktemp('taxi_run') / 'work'),
        trainer={'training': {'train_steps': 150, 'eval_steps': 10}},
    )
    return PipelineRun(sample_dir, config, run_local(config))


@pytest.fixture(scope='session')
def s3_store(tmp_path_factory):
    """An S3 endpoint on 127.0.0.1 (moto's server), one per test process, started on first use;
    its variables set in this process's environment, so that the processes a test starts (tasks,
    replicas) reach it too. Each test makes its own bucket (`new_bucket`)."""
    from asynctrain.testing.object_store import s3_endpoint

    log_path = str(tmp_path_factory.mktemp('s3') / 'moto.log')
    with s3_endpoint(log_path) as store:
        saved = {k: os.environ.get(k) for k in store.environment()}
        os.environ.update(store.environment())
        try:
            yield store
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
