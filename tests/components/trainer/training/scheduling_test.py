"""Scheduling rules that keep remote functions from being instantiated while others run, checked
with fake coordinators: the order of per-worker creation, the rescheduling after `Unable to parse
request` and its bound, and the error for a closure whose result is None."""

import contextlib

import pytest
import tensorflow as tf
from tensorflow.python.distribute.coordinator import remote_value as remote_value_lib

from asynctrain.components.trainer.training import scheduling

PARSE_ERROR = tf.errors.InternalError(
    None, None, 'Unable to parse request /job:worker/replica:0/task:1'
)


class FakeRemoteValue(tf.distribute.experimental.coordinator.RemoteValue):
    """A RemoteValue: `result` is returned by fetch, or raised when it is an exception."""

    def __init__(
        self, result, events=None, name='', status=remote_value_lib.RemoteValueStatus.READY
    ):
        self.result = result
        self.events = events
        self.name = name
        self._status = status  # ABORTED: its worker was lost (TensorFlow's `values.py`)

    def fetch(self):
        if isinstance(self.result, BaseException):
            raise self.result
        return self.result

    def _get_error(self):
        if self.events is not None:
            self.events.append(f'wait {self.name}')
        return self.result if isinstance(self.result, BaseException) else None


class FakeWorker:
    def __init__(self, index, events, failure=None, lost=False):
        self.worker_index = index
        self.events = events
        self.failure = failure
        self.lost = lost

    def create_resource(self, fn, args=None, kwargs=None):
        self.events.append(f'create {self.worker_index} {args}')
        if self.lost:  # what `Worker` gives while the worker is unavailable
            error = tf.errors.UnavailableError(None, None, 'Transport closed')
            return FakeRemoteValue(
                error,
                self.events,
                str(self.worker_index),
                remote_value_lib.RemoteValueStatus.ABORTED,
            )
        result = self.failure or {'worker': self.worker_index, 'steps': 0}
        return FakeRemoteValue(result, self.events, str(self.worker_index))


class FakeCluster:
    def __init__(self, workers):
        self.workers = workers


class FakeExtended:
    _being_scheduled = False


class FakeStrategy:
    """Records whether functions run in its scope, as `ClusterCoordinator.schedule` runs them."""

    def __init__(self):
        self.extended = FakeExtended()
        self.in_scope = False

    @contextlib.contextmanager
    def scope(self):
        self.in_scope = True
        try:
            yield
        finally:
            self.in_scope = False


class FakeCoordinator:
    """Schedules by handing out the next prepared outcome; `join` raises the queued errors."""

    def __init__(self, outcomes=(), join_errors=(), workers=()):
        self.strategy = FakeStrategy()
        self.outcomes = list(outcomes)
        self.join_errors = list(join_errors)
        self.scheduled = []
        self.joins = 0
        self._cluster = FakeCluster(list(workers))

    def schedule(self, fn, args=None, kwargs=None):
        self.scheduled.append(args)
        outcome = self.outcomes.pop(0) if self.outcomes else {'steps': args[0]}
        return FakeRemoteValue(outcome)

    def join(self):
        self.joins += 1
        if self.join_errors:
            raise self.join_errors.pop(0)

    def _create_per_worker_resources(self, fn, args=None, kwargs=None):
        raise AssertionError('replaced by create_resources_in_turn')


def test_per_worker_resources_are_created_one_worker_at_a_time():
    events = []
    coordinator = FakeCoordinator(workers=[FakeWorker(i, events) for i in range(3)])
    scheduling.create_resources_in_turn(coordinator)

    per_worker = coordinator._create_per_worker_resources(lambda: None, args=('x',))

    # Each worker's resource is finished before the next worker's is created.
    assert events == [
        "create 0 ('x',)",
        'wait 0',
        "create 1 ('x',)",
        'wait 1',
        "create 2 ('x',)",
        'wait 2',
    ]
    assert [v.fetch()['worker'] for v in per_worker._values] == [0, 1, 2]


def test_warm_up_runs_once_on_each_worker_and_returns_their_results():
    events = []
    coordinator = FakeCoordinator(workers=[FakeWorker(i, events) for i in range(2)])
    strategy = coordinator.strategy
    contexts = []

    def create_resource(worker):
        def create(fn, args=None, kwargs=None):
            # Traced and run as `schedule` would: in the strategy's scope, being scheduled.
            contexts.append((strategy.in_scope, strategy.extended._being_scheduled))
            return FakeWorker.create_resource(worker, fn, args, kwargs)

        return create

    for worker in coordinator._cluster.workers:
        worker.create_resource = create_resource(worker)

    results = scheduling.warm_up(coordinator, lambda it, n: None, ('iterator', 0))

    assert contexts == [(True, True), (True, True)]
    assert (strategy.in_scope, strategy.extended._being_scheduled) == (False, False)

    assert results == [{'worker': 0, 'steps': 0}, {'worker': 1, 'steps': 0}]
    assert events == ["create 0 ('iterator', 0)", 'wait 0', "create 1 ('iterator', 0)", 'wait 1']


def test_a_failed_per_worker_creation_names_the_worker():
    events = []
    failure = tf.errors.InvalidArgumentError(None, None, 'bad dataset')
    coordinator = FakeCoordinator(
        workers=[FakeWorker(0, events), FakeWorker(1, events, failure=failure)]
    )

    with pytest.raises(RuntimeError, match='failed on worker 1: bad dataset'):
        scheduling.warm_up(coordinator, lambda: None, ())


def test_a_lost_worker_does_not_fail_creation_or_warm_up_and_the_others_go_on():
    # TensorFlow creates a lost worker's registered resources again when it is back
    # (`Worker._on_worker_recovery`); failing here would end a run that stock training survives.
    events = []
    workers = [FakeWorker(0, events), FakeWorker(1, events, lost=True), FakeWorker(2, events)]
    coordinator = FakeCoordinator(workers=workers)
    scheduling.create_resources_in_turn(coordinator)

    per_worker = coordinator._create_per_worker_resources(lambda: None, args=('x',))
    results = scheduling.warm_up(coordinator, lambda it, n: None, ('iterator', 0))

    assert [v._status for v in per_worker._values] == [
        remote_value_lib.RemoteValueStatus.READY,
        remote_value_lib.RemoteValueStatus.ABORTED,
        remote_value_lib.RemoteValueStatus.READY,
    ]
    # Every worker was asked in turn, the lost one included; warm-up has the others' results.
    assert [e for e in events if e.startswith('create')] == [
        "create 0 ('x',)",
        "create 1 ('x',)",
        "create 2 ('x',)",
        "create 0 ('iterator', 0)",
        "create 1 ('iterator', 0)",
        "create 2 ('iterator', 0)",
    ]
    assert results == [{'worker': 0, 'steps': 0}, {'worker': 2, 'steps': 0}]


def test_coordinator_internals_of_this_tensorflow_are_checked():
    with pytest.raises(RuntimeError, match=r'_cluster.workers\[i\].create_resource not found'):
        scheduling.check_coordinator_internals(object())


def test_none_from_fetch_is_a_clear_error():
    closure = scheduling.ScheduledClosure(7, ('iterator', 5), FakeRemoteValue(None))

    with pytest.raises(scheduling.ClosureResultMissing, match='closure 7 .*fetch\\(\\) gave None'):
        closure.fetch()
    assert not closure.done


def test_closures_a_parse_error_failed_or_cancelled_are_rescheduled_and_counted():
    cancelled = tf.errors.CancelledError(None, None, 'cancelled. Please reschedule')
    # Closure 1 finishes, 2 fails with the parse error, 3 is cancelled with it.
    coordinator = FakeCoordinator(
        outcomes=[{'steps': 1}, PARSE_ERROR, cancelled], join_errors=[PARSE_ERROR]
    )
    scheduler = scheduling.ClosureScheduler(coordinator, fn := object())
    closures = [scheduler.schedule((steps,)) for steps in (1, 2, 3)]

    scheduler.join()

    assert scheduler.rescheduled == 2
    assert scheduler.recoveries == 1
    # Scheduled again with their own arguments, then joined again.
    assert coordinator.scheduled == [(1,), (2,), (3,), (2,), (3,)]
    assert coordinator.joins == 2
    assert [c.fetch() for c in closures] == [{'steps': 1}, {'steps': 2}, {'steps': 3}]
    assert fn is scheduler.function


def test_a_parse_error_raised_by_schedule_reschedules_that_closure_too():
    class RaisingOnce(FakeCoordinator):
        def schedule(self, fn, args=None, kwargs=None):
            if len(self.scheduled) == 1:
                self.scheduled.append(args)
                raise PARSE_ERROR
            return super().schedule(fn, args, kwargs)

    coordinator = RaisingOnce(outcomes=[PARSE_ERROR])
    scheduler = scheduling.ClosureScheduler(coordinator, object())
    first = scheduler.schedule((1,))
    second = scheduler.schedule((2,))

    assert coordinator.scheduled == [(1,), (2,), (1,), (2,)]
    assert scheduler.rescheduled == 2
    assert (first.fetch(), second.fetch()) == ({'steps': 1}, {'steps': 2})


def test_fetching_a_closure_that_failed_to_parse_reschedules_it_and_gives_its_result():
    coordinator = FakeCoordinator(outcomes=[{'steps': 1}, PARSE_ERROR], join_errors=[PARSE_ERROR])
    scheduler = scheduling.ClosureScheduler(coordinator, object())
    first, second = scheduler.schedule((1,)), scheduler.schedule((2,))

    # The failed closure is fetched before any schedule or join saw its error.
    assert second.fetch() == {'steps': 2}
    assert first.fetch() == {'steps': 1}
    assert coordinator.scheduled == [(1,), (2,), (2,)]
    assert (scheduler.rescheduled, coordinator.joins) == (1, 2)


def test_rescheduling_stops_after_max_recoveries():
    coordinator = FakeCoordinator(
        outcomes=[PARSE_ERROR, PARSE_ERROR, PARSE_ERROR],
        join_errors=[PARSE_ERROR, PARSE_ERROR, PARSE_ERROR],
    )
    scheduler = scheduling.ClosureScheduler(coordinator, object(), max_recoveries=2)
    scheduler.schedule((4,))

    with pytest.raises(RuntimeError, match='3 times in this run .at most 2 are rescheduled'):
        scheduler.join()
    assert scheduler.rescheduled == 2


def test_other_internal_errors_are_not_rescheduled():
    other = tf.errors.InternalError(None, None, 'Check failed: something else')
    coordinator = FakeCoordinator(join_errors=[other])
    scheduler = scheduling.ClosureScheduler(coordinator, object())
    scheduler.schedule((4,))

    with pytest.raises(tf.errors.InternalError, match='something else'):
        scheduler.join()
    assert scheduler.rescheduled == 0
    assert coordinator.scheduled == [(4,)]
