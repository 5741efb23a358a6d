"""Submitting a TFJob, waiting for it and cancelling it, through the Training Operator SDK.

`run_tfjob` submits a job through the SDK's `TrainingClient`, waits for it, names the replica
that made it fail and why, and deletes the job when the caller is cancelled (KFP sends SIGTERM)
or the time is up. `train_on_kubernetes` is what the Trainer's executor calls (`training.py`):
build the TFJob from the values file and run it, with `run_tfjob` or another `TFJobRunner` (the
local launcher, `local.runner`).

Only `run_tfjob` makes API calls; nothing talks to a cluster at import time.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from kubeflow.training import TrainingClient, models
from kubeflow.training.constants import constants

from asynctrain.components.trainer import train_arguments
from asynctrain.components.trainer.kubernetes import tfjob as tfjob_lib
from asynctrain.components.trainer.kubernetes import values

# Runs a built TFJob to completion within a timeout, raising if it fails: `run_tfjob` with a
# `TrainingClient` on a cluster, or another runner (the local launcher, a test's) for the same job.
TFJobRunner = Callable[[models.KubeflowOrgV1TFJob, float], Any]


class TFJobFailed(RuntimeError):
    """The TFJob ended in the Failed condition; says which replica failed and why."""

    def __init__(self, job_name: str, message: str, failed_replicas: list[dict[str, Any]]):
        self.job_name = job_name
        self.failed_replicas = failed_replicas
        details = '; '.join(
            f'{r["replica_type"]} {r["index"]} (pod {r["pod"]}): {r["reason"]}'
            + (f' exit code {r["exit_code"]}' if r['exit_code'] is not None else '')
            + (f': {r["message"]}' if r['message'] else '')
            for r in failed_replicas
        )
        super().__init__(
            f'TFJob {job_name} failed: {message}' + (f' [{details}]' if details else '')
        )


class TFJobCancelled(BaseException):
    """The process running `run_tfjob` received SIGTERM (KFP cancels a run this way).

    A BaseException, like KeyboardInterrupt, because the signal usually lands inside an SDK call
    that turns every `Exception` into a RuntimeError.
    """


def _conditions(job: models.KubeflowOrgV1TFJob) -> dict[str, models.KubeflowOrgV1JobCondition]:
    found = {}
    for condition in (job.status.conditions or []) if job.status else []:
        if condition.status == constants.CONDITION_STATUS_TRUE:
            found[condition.type] = condition
    return found


def failed_replicas(
    training_client: TrainingClient, name: str, namespace: str
) -> list[dict[str, Any]]:
    """The replicas of a job whose pod failed, with the reason and exit code Kubernetes reports."""
    pods = training_client.core_api.list_namespaced_pod(
        namespace, label_selector=f'{constants.JOB_NAME_LABEL}={name}'
    )
    failed = []
    for pod in pods.items:
        labels = pod.metadata.labels or {}
        terminated = None
        for status in (pod.status.container_statuses or []) if pod.status else []:
            if status.name != tfjob_lib.CONTAINER_NAME:
                continue
            state = status.state.terminated if status.state else None
            last = status.last_state.terminated if status.last_state else None
            terminated = state or last
        failed_phase = pod.status is not None and pod.status.phase == 'Failed'
        if not failed_phase and not (terminated is not None and terminated.exit_code != 0):
            continue
        failed.append(
            {
                'replica_type': labels.get(constants.REPLICA_TYPE_LABEL, '?'),
                'index': labels.get(constants.REPLICA_INDEX_LABEL, '?'),
                'pod': pod.metadata.name,
                'reason': (terminated.reason if terminated else None)
                or pod.status.reason
                or 'Failed',
                'exit_code': terminated.exit_code if terminated else None,
                'message': (terminated.message if terminated else None) or pod.status.message or '',
            }
        )
    return failed


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    """Turns SIGTERM into `TFJobCancelled` while waiting, where a handler can be installed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise TFJobCancelled(f'received signal {signum}')

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_tfjob(
    training_client: TrainingClient,
    tfjob: models.KubeflowOrgV1TFJob,
    *,
    timeout_s: float,
    poll_interval_s: float = 15.0,
) -> models.KubeflowOrgV1TFJob:
    """Submits `tfjob`, waits until it succeeds, and returns the finished job.

    Raises:
      TFJobFailed: the job reached Failed; the message names each failed replica and its reason.
      TimeoutError: the job did not finish within `timeout_s`; the job is deleted.
      TFJobCancelled: SIGTERM arrived while waiting (or KeyboardInterrupt); the job is deleted.
    """
    name, namespace = tfjob.metadata.name, tfjob.metadata.namespace
    with _sigterm_raises():
        training_client.create_tfjob(tfjob, namespace=namespace)
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                job = training_client.get_tfjob(name, namespace=namespace)
                conditions = _conditions(job)
                if constants.JOB_CONDITION_SUCCEEDED in conditions:
                    return job
                if constants.JOB_CONDITION_FAILED in conditions:
                    message = conditions[constants.JOB_CONDITION_FAILED].message or ''
                    raise TFJobFailed(
                        name, message, failed_replicas(training_client, name, namespace)
                    )
                if time.monotonic() >= deadline:
                    raise TimeoutError(
                        f'TFJob {namespace}/{name} did not finish within {timeout_s} s'
                    )
                time.sleep(poll_interval_s)
        except (TFJobCancelled, KeyboardInterrupt, TimeoutError):
            logging.warning('Deleting TFJob %s/%s', namespace, name)
            training_client.delete_tfjob(name, namespace=namespace)
            raise


def train_on_kubernetes(
    *,
    values_path: str | os.PathLike[str],
    name: str,
    namespace: str,
    image: str,
    train: train_arguments.TrainArguments,
    timeout_s: float,
    training_client: TrainingClient | None = None,
    runner: TFJobRunner | None = None,
) -> Any:
    """What the Trainer's executor calls in a KFP pod: build the TFJob from the values file, run it.

    By default the job is submitted with `run_tfjob` through `training_client`; the default
    `TrainingClient()` uses the pod's in-cluster service account (the `asynctrain-pipeline`
    account of kubeflow/rbac.yaml). `runner`, when given, runs the same job instead (e.g.
    `local.runner` on one machine). The chief writes the model where `train` says, so on
    return the executor publishes what is there. Returns what the runner returns (by default
    the finished job).
    """
    tfjob = tfjob_lib.build_tfjob(
        values.load_tfjob_settings(values_path),
        name=name,
        namespace=namespace,
        image=image,
        train=train,
    )
    if runner is not None:
        return runner(tfjob, timeout_s)
    return run_tfjob(training_client or TrainingClient(), tfjob, timeout_s=timeout_s)
