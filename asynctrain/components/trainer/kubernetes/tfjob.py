"""The TFJob manifest: parameter-server training as a Training Operator `TFJob` (`kubeflow.org/v1`).

- `build_tfjob` turns the settings of the values file (`values.py`) and the `asynctrain train`
  arguments of one run into a `KubeflowOrgV1TFJob` built from the Training Operator SDK's models,
  whose Chief, Worker and PS replicas all run `asynctrain train` in `TF_CONFIG` mode;
  `to_manifest` and `from_manifest` convert it to and from the document `kubectl` takes.
- `tf_config_for` gives the `TF_CONFIG` the operator injects into one replica, so that the local
  launcher (`local.py`) and tests reproduce a cluster's view exactly.
- `job_name` and `pod_namespace` say what the job is called and where it goes.

Submitting, waiting and cancelling are `client.py`'s. Nothing here talks to a cluster.

    python -m asynctrain.components.trainer.kubernetes.tfjob --name N --namespace NS --image I \
        --examples URI --transform-graph URI --output URI --label-key LABEL

prints the TFJob YAML for review or `kubectl apply --dry-run`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
from collections.abc import Mapping
from typing import Any

import yaml
from kubeflow.training import models
from kubeflow.training.constants import constants
from kubernetes import client as k8s

from asynctrain.components.shared import tf_environment
from asynctrain.components.trainer import config as config_lib
from asynctrain.components.trainer import train_arguments
from asynctrain.components.trainer.kubernetes import values
from asynctrain.components.trainer.kubernetes.values import DEFAULT_PORT, REPLICA_TYPES

# The operator's defaults (training-operator pkg/apis/kubeflow.org/v1/tensorflow_types.go):
# TF_CONFIG addresses use the port named `tfjob-port` of the container named `tensorflow`,
# or DEFAULT_PORT when there is none.
CONTAINER_NAME = constants.TFJOB_CONTAINER
PORT_NAME = 'tfjob-port'
# The operator adds this suffix to service names when set in its own environment; the default
# cluster DNS answers `<svc>.<namespace>.svc` without it.
CUSTOM_CLUSTER_DOMAIN_ENV = 'CUSTOM_CLUSTER_DOMAIN'

# What every replica's process needs before TensorFlow loads (see asynctrain/components/shared/tf_environment.py).
_TRAINER_ENV = tuple(tf_environment.VARIABLES.items())
# The uid of the user kubeflow/Dockerfile creates; running as it makes `runAsNonRoot` checkable.
_NON_ROOT_UID = 10001

# Where Kubernetes mounts a pod's service-account token, and with it the pod's namespace.
SERVICE_ACCOUNT_NAMESPACE_FILE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace'
# The execution id part of a job name: `<prefix>-<id>` leaves room for `-worker-<i>` in 63.
_MAX_ID_LENGTH = 12


def _container(
    settings: values.TFJobSettings,
    replica: values.ReplicaSettings,
    image: str,
    argv: list[str],
) -> k8s.V1Container:
    resources = replica.resources
    return k8s.V1Container(
        name=CONTAINER_NAME,
        image=image,
        command=['asynctrain'],
        args=argv,
        env=[k8s.V1EnvVar(name=name, value=value) for name, value in _TRAINER_ENV],
        ports=[k8s.V1ContainerPort(name=PORT_NAME, container_port=settings.port, protocol='TCP')],
        resources=k8s.V1ResourceRequirements(
            requests={k: str(v) for k, v in resources.requests.items()},
            limits={k: str(v) for k, v in resources.limits.items()},
        ),
        security_context=k8s.V1SecurityContext(
            run_as_non_root=True,
            allow_privilege_escalation=False,
            privileged=False,
            capabilities=k8s.V1Capabilities(drop=['ALL']),
        ),
    )


def _check_name(name: str, settings: values.TFJobSettings) -> None:
    """The operator names a Service `<job>-<type>-<i>` per pod: that must be a DNS-1035 label."""
    longest = max(f'{name}-{t.lower()}-{r.replicas - 1}' for t, r in settings.replicas.items())
    if not config_lib.DNS_1035_LABEL.match(name) or len(longest) > config_lib.MAX_DNS_LABEL_LENGTH:
        raise ValueError(
            f'name: {name!r} must be lower-case letters, digits and "-", start with a letter, and '
            f'leave the service name {longest!r} within {config_lib.MAX_DNS_LABEL_LENGTH} characters'
        )


def _snake_case(mapping: Mapping[str, Any]) -> dict[str, Any]:
    return {
        ''.join('_' + c.lower() if c.isupper() else c for c in k): v for k, v in mapping.items()
    }


def build_tfjob(
    settings: values.TFJobSettings,
    *,
    name: str,
    namespace: str,
    image: str,
    train: train_arguments.TrainArguments,
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
            service_account_name=settings.serviceAccountName,
            # Replicas read and write storage, never the Kubernetes API.
            automount_service_account_token=False,
            node_selector=dict(replica.nodeSelector) or None,
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
            restart_policy=replica.restartPolicy,
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
                active_deadline_seconds=settings.activeDeadlineSeconds,
                backoff_limit=settings.backoffLimit,
                ttl_seconds_after_finished=settings.ttlSecondsAfterFinished,
            ),
            tf_replica_specs=replica_specs,
        ),
    )


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
    """The container named `tensorflow` in `pod_spec` (the one the operator configures), or None."""
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


def main(argv: list[str] | None = None) -> int:
    """Prints the TFJob YAML one run would submit, for review or `kubectl apply --dry-run`."""
    parser = argparse.ArgumentParser(
        prog='python -m asynctrain.components.trainer.kubernetes.tfjob', description=main.__doc__
    )
    parser.add_argument(
        '--values', default='kubeflow/tfjob-values.yaml', help='The TFJob values file.'
    )
    parser.add_argument('--name', required=True, help='The TFJob name.')
    parser.add_argument('--namespace', required=True, help='The namespace it goes to.')
    parser.add_argument('--image', required=True, help='The image every replica runs.')
    train_arguments.add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        train = train_arguments.TrainArguments.from_namespace(args)
    except ValueError as e:
        parser.error(str(e))
    tfjob = build_tfjob(
        values.load_tfjob_settings(args.values),
        name=args.name,
        namespace=args.namespace,
        image=args.image,
        train=train,
    )
    print(yaml.safe_dump(to_manifest(tfjob), sort_keys=False), end='')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
