"""Closures on a `ClusterCoordinator`, scheduled so that no remote function is instantiated while
another one runs.

Why: in TensorFlow 2.16 `EagerClusterFunctionLibraryRuntime::Run` (the coordinator's side of a
remote function call) keeps a pointer into its `function_data_` vector after releasing the lock
that guards it, and an `Instantiate` on another thread may reallocate that vector. The request
sent to the worker then carries a device string read from freed memory: TensorFlow logs
`libprotobuf ERROR ... 'tensorflow.eager.Operation.device' contains invalid UTF-8`, the worker
answers `Unable to parse request`, and the closure fails (issue 15; a reading of TF's source, not
confirmed upstream). The coordinator instantiates a function on a worker the first time it runs
there, and `ClusterCoordinator` runs each worker's closures on a thread of its own: the first
closures, and the per-worker dataset and iterator creation, instantiate on one worker while
another runs. The rules here take those overlaps away:

1. per-worker resources (datasets, iterators, per-worker variables) are created one worker at a
   time, each finished before the next starts (`create_resources_in_turn`,
   `create_per_worker_variables_in_turn`);
2. each function to be scheduled in bulk first runs once on each worker in turn (`warm_up`);
3. a closure that still fails with `Unable to parse request` is scheduled again, at most
   after up to `MAX_RECOVERIES` such errors in a run, and counted (`ClosureScheduler`);
4. a closure whose result is None raises `ClosureResultMissing` instead of handing None on.

Rules 1 and 2 use `ClusterCoordinator` internals (`_cluster.workers`, `Worker.create_resource`,
`_create_per_worker_resources`) of the pinned TensorFlow; `check_coordinator_internals` fails
loudly if an upgrade moves them.
"""

from __future__ import annotations

import dataclasses
import functools
import logging

import tensorflow as tf
from tensorflow.python.distribute.coordinator import remote_value as remote_value_lib

# Parse errors recovered from per training run (each reschedules every unfinished closure): the
# rules above should leave none; a few cover a rare recurrence, more means something else is
# wrong and the run should stop.
MAX_RECOVERIES = 3
PARSE_ERROR = 'Unable to parse request'


class ClosureResultMissing(RuntimeError):
    """A closure finished without error but its `fetch()` gave None."""


def check_coordinator_internals(coordinator) -> None:
    """Raises if this TensorFlow's `ClusterCoordinator` lacks the internals used here."""
    workers = getattr(getattr(coordinator, '_cluster', None), 'workers', None)
    if not workers or not all(hasattr(w, 'create_resource') for w in workers):
        raise RuntimeError(
            f'tf {tf.__version__}: ClusterCoordinator._cluster.workers[i].create_resource not '
            'found; asynctrain/components/trainer/training/scheduling.py relies on it (TF 2.16)'
        )
    if not hasattr(coordinator, '_create_per_worker_resources'):
        raise RuntimeError(
            f'tf {tf.__version__}: ClusterCoordinator._create_per_worker_resources not found; '
            'asynctrain/components/trainer/training/scheduling.py relies on it (TF 2.16)'
        )


def _aborted(remote_value) -> bool:
    """Whether the value's closure was aborted because its worker is lost."""
    return remote_value._status is remote_value_lib.RemoteValueStatus.ABORTED  # noqa: SLF001


def _wait_for(remote_value, what: str, worker_index: int) -> None:
    # A resource's value may be a dataset or an iterator, which `fetch()` cannot copy to the
    # coordinator: wait for its status only.
    error = remote_value._get_error()  # noqa: SLF001 - waits until the closure has run.
    if _aborted(remote_value):
        # The worker is lost (or was lost while this ran). As with stock creation, the resource
        # is created again when the worker is back (`Worker._on_worker_recovery` reschedules
        # every registered resource), and closures meanwhile go to the other workers.
        logging.warning('%s on worker %d waits for it to be back: %s', what, worker_index, error)
        return
    if error is not None:
        raise RuntimeError(f'{what} failed on worker {worker_index}: {error}') from error


def create_on_each_worker_in_turn(coordinator, fn, args=None, kwargs=None, args_for=None):
    """`fn` run on each worker, one after the other, each waited for: what
    `ClusterCoordinator._create_per_worker_resources` does, less the overlap. `args_for`, when
    given, makes each worker's own arguments from its index (instead of `args`).

    Returns:
      A `PerWorkerValues` of the workers' results, in worker order.
    """
    from tensorflow.python.distribute.coordinator import values as values_lib

    results = []
    for worker in coordinator._cluster.workers:  # noqa: SLF001 - see the module docstring.
        worker_args = args_for(worker.worker_index) if args_for is not None else args
        value = worker.create_resource(fn, args=worker_args, kwargs=kwargs)
        _wait_for(value, getattr(fn, '__name__', 'a per-worker function'), worker.worker_index)
        results.append(value)
    return values_lib.PerWorkerValues(tuple(results))


def create_resources_in_turn(coordinator) -> None:
    """From now on, `coordinator.create_per_worker_dataset` and `iter()` on its result create
    their dataset and iterator one worker at a time (rule 1)."""
    check_coordinator_internals(coordinator)
    coordinator._create_per_worker_resources = functools.partial(  # noqa: SLF001
        create_on_each_worker_in_turn, coordinator
    )


def create_per_worker_variables_in_turn(coordinator, variables) -> None:
    """Creates each `per_worker_variable`'s copies now, one worker at a time, each waited for
    (rule 1), instead of on every worker at once when a function's trace first reads it."""
    for variable in variables:
        if getattr(variable, '_per_worker_vars', False):
            continue  # created by an earlier call
        creator = getattr(variable, '_var_creator', None)
        if creator is None or not hasattr(variable, '_per_worker_vars'):
            raise RuntimeError(
                f'tf {tf.__version__}: PerWorkerVariable._var_creator not found; '
                'asynctrain/components/trainer/training/scheduling.py relies on it (TF 2.16)'
            )
        from tensorflow.python.distribute.coordinator import values as values_lib

        copies = []
        for worker in coordinator._cluster.workers:  # noqa: SLF001 - see the module docstring.
            value = worker.create_variable_resource(creator)
            _wait_for(value, f'creating {variable.name}', worker.worker_index)
            copies.append(value)
        variable._per_worker_vars = values_lib.PerWorkerValues(tuple(copies))  # noqa: SLF001


def _own_index_function():
    """A new function each time (one per Trainer): a function outlives the cluster it was sent
    to only as long as something holds it."""

    @tf.function(input_signature=[tf.TensorSpec([], tf.int32)])
    def own_index(index):
        return tf.identity(index)

    return own_index


def worker_index_spec() -> tf.TensorSpec:
    """The spec a scheduled function's `worker_indices` argument arrives with, for its input
    signature. A resource's value carries the spec that `ResourceClosure.__init__` makes of the
    resource function's outputs (`func_graph.convert_structure_to_signature`, TF 2.16 and 2.21
    `cluster_coordinator.py`), which names it; made here the same way."""
    from tensorflow.python.framework import func_graph

    return func_graph.convert_structure_to_signature(
        _own_index_function().get_concrete_function().structured_outputs
    )


def worker_indices(coordinator):
    """Each worker's own task index (an int32 scalar kept on that worker), as a `PerWorkerValues`
    a scheduled function can take: the coordinator hands each closure the value of the worker
    that runs it, so a closure can report which worker ran it. Created one worker at a time
    (rule 1); like any per-worker resource, created again on a worker that comes back."""
    check_coordinator_internals(coordinator)
    return create_on_each_worker_in_turn(
        coordinator,
        _own_index_function(),
        args_for=lambda index: (tf.constant(index, tf.int32),),
    )


def warm_up(coordinator, function, args: tuple) -> list:
    """Runs `function(*args)` once on each worker in turn, each waited for and its result fetched
    (rule 2): afterwards the function and its result copies are instantiated everywhere, so
    scheduling it in bulk instantiates nothing. `args` should make it do no work (zero steps).

    Returns:
      Each worker's fetched result, in worker order, less a lost worker's.
    """
    check_coordinator_internals(coordinator)
    # As `ClusterCoordinator.schedule` calls it: in the strategy's scope, which is part of the
    # function's trace key, so that the bulk schedule reuses this trace and its instantiations.
    strategy = coordinator.strategy
    with strategy.scope():
        strategy.extended._being_scheduled = True  # noqa: SLF001
        try:
            per_worker = create_on_each_worker_in_turn(coordinator, function, args=args)
        finally:
            strategy.extended._being_scheduled = False  # noqa: SLF001
    results = []
    for index, value in enumerate(per_worker._values):  # noqa: SLF001
        if _aborted(value):  # a lost worker: it runs the function when it is back
            continue
        result = value.fetch()
        if result is None:
            raise ClosureResultMissing(
                f'warm-up of {getattr(function, "__name__", function)} on worker {index} '
                'returned no result (fetch() gave None)'
            )
        results.append(result)
    return results


def is_parse_error(error: BaseException) -> bool:
    """The worker could not parse the coordinator's request: the symptom of the race above."""
    return isinstance(error, tf.errors.InternalError) and PARSE_ERROR in str(error)


@dataclasses.dataclass(eq=False)
class ScheduledClosure:
    """One scheduled call and its current `RemoteValue` (replaced when it is rescheduled).

    Attributes:
      number: Its position in the run's schedule, from 1 (for error messages).
      args: What it was scheduled with.
      remote_value: The coordinator's handle on its current run.
      done: Whether its result was fetched.
      scheduler: The `ClosureScheduler` that scheduled it (None for a bare closure).
    """

    number: int
    args: tuple
    remote_value: object = None
    done: bool = False
    scheduler: ClosureScheduler | None = None

    def fetch(self):
        """The closure's result; `ClosureResultMissing` if the coordinator gave None. A closure
        that failed with `Unable to parse request` is rescheduled (through its scheduler's
        `join`, which raises the error, reschedules and waits) and fetched again."""
        try:
            result = self.remote_value.fetch()
        except tf.errors.InternalError as e:
            if self.scheduler is None or not is_parse_error(e):
                raise
            self.scheduler.join()
            result = self.remote_value.fetch()
        if result is None:
            raise ClosureResultMissing(
                f'closure {self.number} finished without error but returned no result '
                '(fetch() gave None): its measurements are unknown'
            )
        self.done = True
        return result


class ClosureScheduler:
    """`coordinator.schedule` and `join` for one function, rescheduling the closures that an
    `Unable to parse request` error failed or cancelled (rule 3), after at most
    `max_recoveries` such errors.

    When a closure fails, `ClusterCoordinator` raises its error from the next `schedule` or
    `join` and cancels every closure still queued; whichever of those had not finished are
    scheduled again here, and each counts in `rescheduled`.
    """

    def __init__(self, coordinator, function, max_recoveries: int = MAX_RECOVERIES):
        self.coordinator = coordinator
        self.function = function
        self.max_recoveries = max_recoveries
        self.recoveries = 0
        self.rescheduled = 0
        self._scheduled = 0
        self._pending: list[ScheduledClosure] = []

    def schedule(self, args: tuple) -> ScheduledClosure:
        self._scheduled += 1
        closure = ScheduledClosure(self._scheduled, args, scheduler=self)
        self._pending = [c for c in self._pending if not c.done]
        self._pending.append(closure)
        self._run(lambda: self._submit(closure), then_join=False)
        return closure

    def join(self) -> None:
        self._run(self.coordinator.join, then_join=True)

    def _submit(self, closure: ScheduledClosure) -> None:
        closure.remote_value = None
        closure.remote_value = self.coordinator.schedule(self.function, args=closure.args)

    def _run(self, call, then_join: bool) -> None:
        while True:
            try:
                call()
                return
            except tf.errors.InternalError as e:
                if not is_parse_error(e):
                    raise
                unfinished = self._unfinished_after(e)

                def call(unfinished=unfinished):
                    for closure in unfinished:
                        self._submit(closure)
                    if then_join:
                        self.coordinator.join()

    def _unfinished_after(self, error: BaseException) -> list[ScheduledClosure]:
        """The closures to schedule again, counted; raises after `max_recoveries` errors."""
        if self.recoveries >= self.max_recoveries:
            raise RuntimeError(
                f'closures failed with {PARSE_ERROR!r} {self.recoveries + 1} times in this run '
                f'(at most {self.max_recoveries} are rescheduled); the last error: {error}'
            ) from error
        self.recoveries += 1
        # When `schedule` or `join` raises, no closure is running any more.
        unfinished = [c for c in self._pending if not c.done and not self._finished(c)]
        logging.warning(
            'A closure failed with %r; rescheduling %d unfinished closures',
            PARSE_ERROR,
            len(unfinished),
        )
        self.rescheduled += len(unfinished)
        return unfinished

    @staticmethod
    def _finished(closure: ScheduledClosure) -> bool:
        """Whether `closure` ran to the end (its result is on the coordinator); False when it was
        never queued, failed, or was cancelled."""
        if closure.remote_value is None:
            return False
        try:
            closure.remote_value.fetch()
        except (tf.errors.CancelledError, tf.errors.InternalError):
            return False
        return True
