"""What a Spark application ran, read from Spark's own records: its event log and the Master.

An event log (`spark.eventLog.enabled`) is one JSON event a line; `SparkListenerTaskEnd` events
name each task attempt's stage, partition, executor and end reason. Which Worker ran an executor
comes from the Workers' work dirs (`<work dir>/<app id>/<executor id>/`), which outlive a killed
Worker, unlike its web UI.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import pathlib
from collections.abc import Sequence


@dataclasses.dataclass(frozen=True)
class TaskRun:
    """One ended task attempt of a Spark application, from its event log.

    Attributes:
      stage_id: the Spark stage.
      partition: the partition it computed (Spark's task index within the stage).
      task_id: Spark's task id (unique within the application; a retry gets a new one).
      executor_id: the executor that ran it.
      worker: index of the Worker that launched that executor (None if no work dir names it).
      end_reason: Spark's end reason: `Success`, `ExecutorLostFailure`, `FetchFailed`, ...
    """

    stage_id: int
    partition: int
    task_id: int
    executor_id: str
    worker: int | None
    end_reason: str

    @property
    def succeeded(self) -> bool:
        return self.end_reason == 'Success'


@dataclasses.dataclass(frozen=True)
class AppRun:
    """One Spark application (one Beam job) as the Master and its event log record it.

    Attributes:
      app_id: Spark's application id (`app-<time>-<n>`).
      name: the application name (Beam's job name with the invocation id).
      state: the Master's final state (`FINISHED`, `FAILED`, `KILLED`); `RUNNING` while active.
      tasks: every ended task attempt, in event-log order.
      executors_by_worker: the executor ids each Worker (by index) launched for this application.
    """

    app_id: str
    name: str
    state: str
    tasks: tuple[TaskRun, ...]
    executors_by_worker: dict[int, frozenset[str]]

    def workers_with_successful_tasks(self) -> set[int]:
        return {task.worker for task in self.tasks if task.succeeded and task.worker is not None}


def read_event_log(path: pathlib.Path) -> list[dict]:
    """A Spark event log's events (one JSON object a line); a torn last line is skipped."""
    events = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            events.append(json.loads(line))
    return events


def task_ends(events: Sequence[dict]) -> list[tuple[int, int, int, str, str]]:
    """(stage id, partition, task id, executor id, end reason) of each `SparkListenerTaskEnd`."""
    return [
        (
            event['Stage ID'],
            event['Task Info']['Index'],
            event['Task Info']['Task ID'],
            str(event['Task Info']['Executor ID']),
            event['Task End Reason']['Reason'],
        )
        for event in events
        if event.get('Event') == 'SparkListenerTaskEnd'
    ]
