"""Our Beam executors' pipelines on a direct runner: no in-process state cache while they run."""

import apache_beam as beam
import pytest
from apache_beam.runners.portability.fn_api_runner import worker_handlers
from apache_beam.runners.worker import statecache
from apache_beam.testing.util import assert_that, equal_to
from tfx.dsl.components.base.base_beam_executor import BaseBeamExecutor

from asynctrain.components.example_batcher.executor import Executor


def _side_input_pipeline(pipeline: beam.Pipeline) -> None:
    """Each of 3 bundles' elements plus the sum of a side input: the worker loads the side input
    through its state handler (and its cache, when it has one)."""
    total = pipeline | 'Side' >> beam.Create([1, 2, 3]) | beam.CombineGlobally(sum)
    added = (
        pipeline
        | 'Main' >> beam.Create([10, 20, 30], reshuffle=True)
        | beam.Map(lambda x, side: x + side, side=beam.pvalue.AsSingleton(total))
    )
    assert_that(added, equal_to([16, 26, 36]))


@pytest.fixture
def weighed(monkeypatch) -> list:
    """Each value Beam's state cache weighs (`statecache.get_deep_size`), recorded."""
    calls = []
    original = statecache.get_deep_size

    def recording(*objs):
        calls.append(objs)
        return original(*objs)

    monkeypatch.setattr(statecache, 'get_deep_size', recording)
    return calls


def test_a_direct_runner_pipeline_reads_side_inputs_without_the_state_cache(weighed):
    # Beam's own: the in-process worker caches the side input, weighing it.
    with beam.Pipeline() as pipeline:
        _side_input_pipeline(pipeline)
    assert weighed
    weighed.clear()
    size = worker_handlers.STATE_CACHE_SIZE_MB
    for beam_args in ([], ['--runner=DirectRunner', '--direct_num_workers=1']):
        executor = Executor(BaseBeamExecutor.Context(beam_pipeline_args=beam_args))
        with executor._make_beam_pipeline() as pipeline:  # noqa: SLF001
            _side_input_pipeline(pipeline)
        assert weighed == [], beam_args
        # Restored for any other pipeline of the process.
        assert worker_handlers.STATE_CACHE_SIZE_MB == size


def test_the_cache_is_restored_when_the_pipeline_fails(weighed):
    executor = Executor(BaseBeamExecutor.Context(beam_pipeline_args=[]))
    size = worker_handlers.STATE_CACHE_SIZE_MB
    with pytest.raises(Exception, match='bad element'):
        with executor._make_beam_pipeline() as pipeline:  # noqa: SLF001
            _ = pipeline | beam.Create([1]) | beam.Map(_fail)
    assert worker_handlers.STATE_CACHE_SIZE_MB == size


def _fail(x):
    raise ValueError(f'bad element {x}')
