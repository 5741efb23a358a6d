"""Parameter-server training on Kubernetes as a Training Operator `TFJob` (`kubeflow.org/v1`).

Three parts, each usable alone:

- `build_tfjob` turns the replica settings of `kubeflow/tfjob-values.yaml` and the paths of one
  training run into a `KubeflowOrgV1TFJob` built from the Training Operator SDK's models, whose
  Chief, Worker and PS replicas all run `asynctrain train` in `TF_CONFIG` mode.
- `tf_config_for` gives the `TF_CONFIG` the operator injects into one replica, so that the local
  launcher (`components/trainer/tfjob_local.py`) and tests reproduce a cluster's view exactly.
- `run_tfjob` submits a job through the SDK's `TrainingClient`, waits for it, names the replica
  that made it fail and why, and deletes the job when the caller is cancelled (KFP sends SIGTERM).

`train_on_kubernetes` puts them together for the Trainer's executor (`tfjob_training`), with
`job_name` and `pod_namespace` for where the job goes; a `TFJobRunner` can run the built job
elsewhere (`tfjob_local.runner`).

Nothing here talks to a cluster at import time; only `run_tfjob` makes API calls.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import yaml
from kubeflow.training import TrainingClient, models
from kubeflow.training.constants import constants
from kubernetes import client as k8s

# The operator's defaults (training-operator pkg/apis/kubeflow.org/v1/tensorflow_types.go):
# TF_CONFIG addresses use the port named `tfjob-port` of the container named `tensorflow`,
# or 2222 when there is none.
CONTAINER_NAME = constants.TFJOB_CONTAINER
PORT_NAME = 'tfjob-port'
DEFAULT_PORT = 2222
# The operator adds this suffix to service names when set in its own environment; the default
# cluster DNS answers `<svc>.<namespace>.svc` without it.
CUSTOM_CLUSTER_DOMAIN_ENV = 'CUSTOM_CLUSTER_DOMAIN'

REPLICA_TYPES = (
    constants.REPLICA_TYPE_CHIEF,
    constants.REPLICA_TYPE_WORKER,
    constants.REPLICA_TYPE_PS,
)
_RESTART_POLICIES = ('Always', 'OnFailure', 'Never', 'ExitCode')
_TRAINER_ENV = (
    # Keras 2 (tf-keras) is what TFX 1.16 and this project's trainer use with TensorFlow 2.16.
    ('TF_USE_LEGACY_KERAS', '1'),
    # A replica that cannot reach a peer yet retries instead of failing at once.
    ('GRPC_FAIL_FAST', 'use_caller'),
)
# The uid of the user kubeflow/Dockerfile creates; running as it makes `runAsNonRoot` checkable.
_NON_ROOT_UID = 10001


@dataclasses.dataclass(frozen=True)
class ReplicaSettings:
    """How one replica type (Chief, Worker or PS) runs on the cluster.

    Attributes:
      replicas: Number of pods of this type; the Chief must have exactly 1.
      restart_policy: The operator's restart policy for these pods: `Never`, `OnFailure`,
        `Always` or `ExitCode` (restart only on retryable exit codes, 128 and above).
      requests: Kubernetes resource requests, e.g. `{'cpu': '2', 'memory': '8Gi'}`.
      limits: Kubernetes resource limits; every pod has a CPU and a memory limit.
      node_selector: Node labels the pods must match, e.g. a node pool.
      tolerations: Taints these pods tolerate, as Kubernetes `Toleration` dicts.
    """

    replicas: int
    restart_policy: str
    requests: Mapping[str, str]
    limits: Mapping[str, str]
    node_selector: Mapping[str, str] = dataclasses.field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()


@dataclasses.dataclass(frozen=True)
class TFJobSettings:
    """Cluster settings shared by every TFJob this project submits (`kubeflow/tfjob-values.yaml`).

    Attributes:
      service_account: Service account of the replica pods; it needs no API permissions, so its
        token is not mounted.
      port: Port the replicas' gRPC servers listen on (the container port `tfjob-port`).
      active_deadline_seconds: Wall-clock limit of the whole job, after which the operator fails it.
      backoff_limit: Pod restarts the operator allows before it fails the job.
      ttl_seconds_after_finished: How long a finished job (and its failed pods) stays for inspection.
      replicas: Settings per replica type, keyed `Chief`, `Worker` and `PS`.
    """

    service_account: str
    port: int
    active_deadline_seconds: int
    backoff_limit: int
    ttl_seconds_after_finished: int
    replicas: Mapping[str, ReplicaSettings]


@dataclasses.dataclass(frozen=True)
class TrainArguments:
    """The paths one `asynctrain train` run reads and writes; the same for every replica.

    Attributes:
      examples: URI of the transformed Examples artifact the trainer reads.
      transform_graph: URI of the Transform graph artifact.
      output: URI under which the chief writes `model/Format-Serving` and `model_run/`; may be
        empty when `serving_model_dir` and `model_run_dir` are both given.
      config: Path or URI of the YAML file the trainer reads its settings from.
      serving_model_dir: Where the chief exports the serving SavedModel, overriding
        `<output>/model/Format-Serving` (the Trainer's executor passes the Model artifact's).
      model_run_dir: Where summaries, checkpoints and the training report go, overriding
        `<output>/model_run` (the executor passes the ModelRun artifact's URI).
      label_key: The transformed label feature; empty keeps `asynctrain train`'s default.
      base_model: A serving SavedModel directory to warm-start from; empty for none.
      extra_args: Further `asynctrain train` flags the caller adds, passed through unchanged.
    """

    examples: str
    transform_graph: str
    output: str = ''
    config: str = ''
    serving_model_dir: str = ''
    model_run_dir: str = ''
    label_key: str = ''
    base_model: str = ''
    extra_args: tuple[str, ...] = ()

    def __post_init__(self):
        if not self.output and not (self.serving_model_dir and self.model_run_dir):
            raise ValueError(
                'output: required unless serving_model_dir and model_run_dir are both '
                f'given, got output={self.output!r}, serving_model_dir='
                f'{self.serving_model_dir!r}, model_run_dir={self.model_run_dir!r}'
            )

    def to_argv(self) -> list[str]:
        flags = (
            ('--examples', self.examples),
            ('--transform-graph', self.transform_graph),
            ('--output', self.output),
            ('--serving-model-dir', self.serving_model_dir),
            ('--model-run-dir', self.model_run_dir),
            ('--config', self.config),
            ('--label-key', self.label_key),
            ('--base-model', self.base_model),
        )
        return [
            'train',
            *(item for flag, value in flags if value for item in (flag, value)),
            *self.extra_args,
        ]


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


def _require(condition: bool, field: str, allowed: str, value: Any) -> None:
    if not condition:
        raise ValueError(f'tfjob values: {field} must be {allowed}, got {value!r}')


def _string_map(value: Any, field: str) -> dict[str, str]:
    value = value or {}
    _require(isinstance(value, Mapping), field, 'a mapping', value)
    return {str(k): str(v) for k, v in value.items()}


def _replica_settings(replica_type: str, raw: Any) -> ReplicaSettings:
    field = f'replicas.{replica_type}'
    _require(isinstance(raw, Mapping), field, 'a mapping', raw)
    replicas = raw.get('replicas')
    if replica_type == constants.REPLICA_TYPE_CHIEF:
        _require(replicas == 1, f'{field}.replicas', '1', replicas)
    else:
        _require(
            isinstance(replicas, int) and replicas >= 1,
            f'{field}.replicas',
            'an integer >= 1',
            replicas,
        )
    restart_policy = raw.get('restartPolicy', 'Never')
    _require(
        restart_policy in _RESTART_POLICIES,
        f'{field}.restartPolicy',
        f'one of {_RESTART_POLICIES}',
        restart_policy,
    )
    resources = raw.get('resources') or {}
    requests = _string_map(resources.get('requests'), f'{field}.resources.requests')
    limits = _string_map(resources.get('limits'), f'{field}.resources.limits')
    for resource in ('cpu', 'memory'):
        _require(
            resource in limits, f'{field}.resources.limits.{resource}', 'set', limits.get(resource)
        )
    tolerations = raw.get('tolerations') or []
    _require(isinstance(tolerations, list), f'{field}.tolerations', 'a list', tolerations)
    return ReplicaSettings(
        replicas=replicas,
        restart_policy=restart_policy,
        requests=requests,
        limits=limits,
        node_selector=_string_map(raw.get('nodeSelector'), f'{field}.nodeSelector'),
        tolerations=tuple(dict(t) for t in tolerations),
    )


def load_tfjob_settings(path: str | os.PathLike[str]) -> TFJobSettings:
    """Reads and validates `kubeflow/tfjob-values.yaml` (or a copy a deployment edits)."""
    with open(path) as f:
        raw = yaml.safe_load(f)
    _require(isinstance(raw, Mapping), '(top level)', 'a mapping', raw)
    replicas = raw.get('replicas') or {}
    _require(
        set(replicas) == set(REPLICA_TYPES),
        'replicas',
        f'exactly the keys {list(REPLICA_TYPES)}',
        sorted(replicas),
    )
    settings = TFJobSettings(
        service_account=raw.get('serviceAccountName', ''),
        port=raw.get('port', DEFAULT_PORT),
        active_deadline_seconds=raw.get('activeDeadlineSeconds', 0),
        backoff_limit=raw.get('backoffLimit', 0),
        ttl_seconds_after_finished=raw.get('ttlSecondsAfterFinished', 0),
        replicas={t: _replica_settings(t, replicas[t]) for t in REPLICA_TYPES},
    )
    _require(
        bool(settings.service_account),
        'serviceAccountName',
        'a service account name',
        settings.service_account,
    )
    _require(
        isinstance(settings.port, int) and 0 < settings.port < 65536,
        'port',
        'a port number',
        settings.port,
    )
    for field in ('active_deadline_seconds', 'backoff_limit', 'ttl_seconds_after_finished'):
        value = getattr(settings, field)
        _require(isinstance(value, int) and value > 0, field, 'a positive integer', value)
    return settings


def _container(
    settings: TFJobSettings, replica: ReplicaSettings, image: str, argv: list[str]
) -> k8s.V1Container:
    return k8s.V1Container(
        name=CONTAINER_NAME,
        image=image,
        command=['asynctrain'],
        args=argv,
        env=[k8s.V1EnvVar(name=name, value=value) for name, value in _TRAINER_ENV],
        ports=[k8s.V1ContainerPort(name=PORT_NAME, container_port=settings.port, protocol='TCP')],
        resources=k8s.V1ResourceRequirements(
            requests=dict(replica.requests), limits=dict(replica.limits)
        ),
        security_context=k8s.V1SecurityContext(
            run_as_non_root=True,
            allow_privilege_escalation=False,
            privileged=False,
            capabilities=k8s.V1Capabilities(drop=['ALL']),
        ),
    )


_DNS_LABEL = re.compile(r'^[a-z]([-a-z0-9]*[a-z0-9])?$')


def _check_name(name: str, settings: TFJobSettings) -> None:
    """The operator names a Service `<job>-<type>-<i>` per pod: that must be a DNS-1035 label."""
    longest = max(f'{name}-{t.lower()}-{r.replicas - 1}' for t, r in settings.replicas.items())
    if not _DNS_LABEL.match(name) or len(longest) > 63:
        raise ValueError(
            f'name: {name!r} must be lower-case letters, digits and "-", start with a letter, and '
            f'leave the service name {longest!r} within 63 characters'
        )


def build_tfjob(
    settings: TFJobSettings, *, name: str, namespace: str, image: str, train: TrainArguments
) -> models.KubeflowOrgV1TFJob:
    """Builds the TFJob for one training run; every replica runs the same `asynctrain train`.

    The replicas tell their role apart by the `TF_CONFIG` the operator injects (see
    `tf_config_for`), so their command lines are identical.
    """
    _check_name(name, settings)
    argv = train.to_argv()
    replica_specs = {}
    for replica_type in REPLICA_TYPES:
        replica = settings.replicas[replica_type]
        pod_spec = k8s.V1PodSpec(
            containers=[_container(settings, replica, image, argv)],
            service_account_name=settings.service_account,
            # Replicas read and write storage, never the Kubernetes API.
            automount_service_account_token=False,
            node_selector=dict(replica.node_selector) or None,
            tolerations=[k8s.V1Toleration(**_snake_case(t)) for t in replica.tolerations] or None,
            security_context=k8s.V1PodSecurityContext(
                run_as_non_root=True,
                run_as_user=_NON_ROOT_UID,
                run_as_group=_NON_ROOT_UID,
                fs_group=_NON_ROOT_UID,
                seccomp_profile=k8s.V1SeccompProfile(type='RuntimeDefault'),
            ),
        )
        replica_specs[replica_type] = models.KubeflowOrgV1ReplicaSpec(
            replicas=replica.replicas,
            restart_policy=replica.restart_policy,
            template=k8s.V1PodTemplateSpec(
                # Istio sidecars never exit, which would keep a finished replica's pod running.
                metadata=k8s.V1ObjectMeta(annotations={constants.ISTIO_SIDECAR_INJECTION: 'false'}),
                spec=pod_spec,
            ),
        )
    return models.KubeflowOrgV1TFJob(
        api_version=f'{constants.KUBEFLOW_GROUP}/{constants.OPERATOR_VERSION}',
        kind=constants.TFJOB_KIND,
        metadata=k8s.V1ObjectMeta(
            name=name, namespace=namespace, labels={'app.kubernetes.io/part-of': 'asynctrain'}
        ),
        spec=models.KubeflowOrgV1TFJobSpec(
            run_policy=models.KubeflowOrgV1RunPolicy(
                # Keep failed pods for the failure report; remove PS and workers still running
                # once the chief has finished.
                clean_pod_policy='Running',
                active_deadline_seconds=settings.active_deadline_seconds,
                backoff_limit=settings.backoff_limit,
                ttl_seconds_after_finished=settings.ttl_seconds_after_finished,
            ),
            tf_replica_specs=replica_specs,
        ),
    )


def _snake_case(mapping: Mapping[str, Any]) -> dict[str, Any]:
    return {
        ''.join('_' + c.lower() if c.isupper() else c for c in k): v for k, v in mapping.items()
    }


def to_manifest(tfjob: models.KubeflowOrgV1TFJob) -> dict[str, Any]:
    """The TFJob as the JSON/YAML document `kubectl apply` and the API server take."""
    return k8s.ApiClient().sanitize_for_serialization(tfjob)


def from_manifest(manifest: Mapping[str, Any]) -> models.KubeflowOrgV1TFJob:
    """Parses a TFJob document into the SDK's model (the inverse of `to_manifest`)."""
    from kubeflow.training.api_client import ApiClient

    class _Response:
        data = json.dumps(manifest)

    return ApiClient().deserialize(_Response(), models.KubeflowOrgV1TFJob)


def tensorflow_container(pod_spec: Any) -> Any:
    for container in pod_spec.containers:
        if container.name == CONTAINER_NAME:
            return container
    return None


def _port_of(replica_spec: models.KubeflowOrgV1ReplicaSpec) -> int:
    container = tensorflow_container(replica_spec.template.spec)
    for port in (container.ports or []) if container is not None else []:
        if port.name == PORT_NAME:
            return port.container_port
    return DEFAULT_PORT


def tf_config_for(
    tfjob: models.KubeflowOrgV1TFJob, replica_type: str, index: int
) -> dict[str, Any] | None:
    """The `TF_CONFIG` the Training Operator sets on replica `replica_type` #`index` of `tfjob`.

    Follows the operator's `genTFConfigJSONStr`/`genClusterSpec` (pkg/controller.v1/tensorflow):
    every replica type, lower-cased, lists `<job>-<type>-<i>.<namespace>.svc[.<domain>]:<port>`
    (the headless service per pod the operator creates), the task is the lower-cased type and
    index, and `environment` is `cloud`. A job of a single pod is not distributed and gets no
    `TF_CONFIG`; this returns None then. Dynamic-worker (sparse) jobs are not built here.
    """
    specs = tfjob.spec.tf_replica_specs
    if replica_type not in specs:
        raise ValueError(f'replica_type must be one of {sorted(specs)}, got {replica_type!r}')
    if not 0 <= index < specs[replica_type].replicas:
        raise ValueError(f'index must be in [0, {specs[replica_type].replicas}), got {index}')
    if sum(s.replicas if s.replicas is not None else 1 for s in specs.values()) == 1:
        return None
    domain = os.environ.get(CUSTOM_CLUSTER_DOMAIN_ENV, '')
    name, namespace = tfjob.metadata.name, tfjob.metadata.namespace
    cluster = {}
    # Go's encoding/json writes map keys sorted; keeping that order makes the JSON text equal too.
    for rtype in sorted(specs, key=str.lower):
        rt = rtype.lower()
        port = _port_of(specs[rtype])
        hosts = []
        for i in range(specs[rtype].replicas):
            service = f'{name}-{rt}-{i}'.replace('/', '-') + f'.{namespace}.svc'
            if domain:
                service += f'.{domain}'
            hosts.append(f'{service}:{port}')
        cluster[rt] = hosts
    return {
        'cluster': cluster,
        'task': {'type': replica_type.lower(), 'index': index},
        'environment': 'cloud',
    }


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
            if status.name != CONTAINER_NAME:
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


# Runs a built TFJob to completion within a timeout, raising if it fails: `run_tfjob` with a
# `TrainingClient` on a cluster, or another runner (the local launcher, a test's) for the same job.
TFJobRunner = Callable[[models.KubeflowOrgV1TFJob, float], Any]

# Where Kubernetes mounts a pod's service-account token, and with it the pod's namespace.
SERVICE_ACCOUNT_NAMESPACE_FILE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace'
# The execution id part of a job name: `<prefix>-<id>` leaves room for `-worker-<i>` in 63.
_MAX_ID_LENGTH = 12


def pod_namespace(path: str | None = None) -> str:
    """The namespace of the pod this process runs in, as its service account's mount says
    (`path` defaults to `SERVICE_ACCOUNT_NAMESPACE_FILE`)."""
    path = path or SERVICE_ACCOUNT_NAMESPACE_FILE
    try:
        with open(path, encoding='utf-8') as f:
            namespace = f.read().strip()
    except OSError as e:
        raise ValueError(
            f'namespace: not set, and the pod namespace file {path} cannot be read '
            f'({e.strerror}); outside a Kubernetes pod, set the namespace'
        ) from None
    if not namespace:
        raise ValueError(f'namespace: not set, and the pod namespace file {path} is empty')
    return namespace


def job_name(prefix: str, execution_id: str) -> str:
    """`<prefix>-<id>`: the same name for the same execution, valid as a TFJob name.

    An id that is already short lower-case letters and digits (a TFX execution id such as `9`)
    is used as is, so the job is easy to find; anything else (KFP v2's `<task>_<uuid>`, an
    artifact URI) becomes the first 12 hex digits of its SHA-256, which stays deterministic.
    """
    if not execution_id:
        raise ValueError('execution_id: expected a non-empty id of the execution')
    if re.fullmatch(f'[a-z0-9]{{1,{_MAX_ID_LENGTH}}}', execution_id):
        suffix = execution_id
    else:
        suffix = hashlib.sha256(execution_id.encode('utf-8')).hexdigest()[:_MAX_ID_LENGTH]
    return f'{prefix}-{suffix}'


def train_on_kubernetes(
    *,
    values_path: str | os.PathLike[str],
    name: str,
    namespace: str,
    image: str,
    train: TrainArguments,
    timeout_s: float,
    training_client: TrainingClient | None = None,
    runner: TFJobRunner | None = None,
) -> Any:
    """What the Trainer's executor calls in a KFP pod: build the TFJob from the values file, run it.

    By default the job is submitted with `run_tfjob` through `training_client`; the default
    `TrainingClient()` uses the pod's in-cluster service account (the `asynctrain-pipeline`
    account of kubeflow/rbac.yaml). `runner`, when given, runs the same job instead (e.g.
    `tfjob_local.runner` on one machine). The chief writes the model where `train` says, so on
    return the executor publishes what is there. Returns what the runner returns (by default
    the finished job).
    """
    tfjob = build_tfjob(
        load_tfjob_settings(values_path), name=name, namespace=namespace, image=image, train=train
    )
    if runner is not None:
        return runner(tfjob, timeout_s)
    return run_tfjob(training_client or TrainingClient(), tfjob, timeout_s=timeout_s)


def main(argv: list[str] | None = None) -> int:
    """`python -m components.trainer.tfjob ...`: print the TFJob YAML for review or `kubectl apply --dry-run`."""
    import argparse

    parser = argparse.ArgumentParser(
        prog='python -m components.trainer.tfjob', description=main.__doc__
    )
    parser.add_argument('--values', default='kubeflow/tfjob-values.yaml')
    parser.add_argument('--name', required=True)
    parser.add_argument('--namespace', required=True)
    parser.add_argument('--image', required=True)
    parser.add_argument('--examples', required=True)
    parser.add_argument('--transform-graph', required=True)
    parser.add_argument('--output', default='')
    parser.add_argument('--serving-model-dir', default='')
    parser.add_argument('--model-run-dir', default='')
    parser.add_argument('--config', required=True)
    parser.add_argument('--label-key', default='')
    args = parser.parse_args(argv)
    try:
        train = TrainArguments(
            examples=args.examples,
            transform_graph=args.transform_graph,
            output=args.output,
            config=args.config,
            serving_model_dir=args.serving_model_dir,
            model_run_dir=args.model_run_dir,
            label_key=args.label_key,
        )
    except ValueError as e:
        parser.error(str(e))
    tfjob = build_tfjob(
        load_tfjob_settings(args.values),
        name=args.name,
        namespace=args.namespace,
        image=args.image,
        train=train,
    )
    print(yaml.safe_dump(to_manifest(tfjob), sort_keys=False), end='')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
