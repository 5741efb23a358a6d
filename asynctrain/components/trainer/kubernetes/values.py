"""The TFJob values file (`kubeflow/tfjob-values.yaml`): the cluster settings of every TFJob.

Loaded by the project's one config loader (`asynctrain/components/shared/yaml_config.py`) into frozen dataclasses
whose fields are named as the file names them (the Kubernetes spelling, `restartPolicy`), so an
error's field path is the file's own: a wrong type, an unknown key or a value out of range is a
`yaml_config.ConfigError` naming the file and the field, for example

    kubeflow/tfjob-values.yaml: replicas.Worker.replicas must be an integer >= 1, got 0
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from kubeflow.training.constants import constants

from asynctrain.components.shared import yaml_config

REPLICA_TYPES = (
    constants.REPLICA_TYPE_CHIEF,
    constants.REPLICA_TYPE_WORKER,
    constants.REPLICA_TYPE_PS,
)
RESTART_POLICIES = ('Always', 'OnFailure', 'Never', 'ExitCode')
# The operator's port when the container names none (training-operator tensorflow_types.go).
DEFAULT_PORT = 2222
# Every pod has these limits, so none can starve the node it shares.
_REQUIRED_LIMITS = ('cpu', 'memory')


def _require(condition: bool, where: str, allowed: str, value: Any) -> None:
    # `<field path> must be <allowed>`: the wording these checks have always had.
    if not condition:
        yaml_config.fail('', f'{where} must be {allowed}, got {value!r}')


@dataclasses.dataclass(frozen=True)
class Resources:
    """Kubernetes resource quantities of one container.

    Attributes:
      requests: What the scheduler reserves, e.g. `{'cpu': '2', 'memory': '8Gi'}`.
      limits: What the container may use at most; `cpu` and `memory` are required.
    """

    requests: dict[str, str | int | float] = dataclasses.field(default_factory=dict)
    limits: dict[str, str | int | float] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class ReplicaSettings:
    """How one replica type (Chief, Worker or PS) runs on the cluster.

    Attributes:
      replicas: Number of pods of this type; the Chief must have exactly 1.
      resources: The container's resource requests and limits.
      restartPolicy: The operator's restart policy for these pods: `Never`, `OnFailure`,
        `Always` or `ExitCode` (restart only on retryable exit codes, 128 and above).
      nodeSelector: Node labels the pods must match, e.g. a node pool.
      tolerations: Taints these pods tolerate, as Kubernetes `Toleration` mappings.
    """

    replicas: int
    resources: Resources
    restartPolicy: str = 'Never'
    nodeSelector: dict[str, str] = dataclasses.field(default_factory=dict)
    tolerations: tuple[dict, ...] = ()

    def check(self, where: str, replica_type: str) -> None:
        """Raises a ConfigError naming the field under `where` (`replicas.Worker`)."""
        if replica_type == constants.REPLICA_TYPE_CHIEF:
            _require(self.replicas == 1, f'{where}.replicas', '1', self.replicas)
        else:
            _require(self.replicas >= 1, f'{where}.replicas', 'an integer >= 1', self.replicas)
        _require(
            self.restartPolicy in RESTART_POLICIES,
            f'{where}.restartPolicy',
            f'one of {RESTART_POLICIES}',
            self.restartPolicy,
        )
        limits = self.resources.limits
        for resource in _REQUIRED_LIMITS:
            _require(
                resource in limits,
                f'{where}.resources.limits.{resource}',
                'set',
                limits.get(resource),
            )


@dataclasses.dataclass(frozen=True)
class TFJobSettings:
    """Cluster settings shared by every TFJob this project submits (`kubeflow/tfjob-values.yaml`).

    Attributes:
      serviceAccountName: Service account of the replica pods; it needs no API permissions, so
        its token is not mounted.
      activeDeadlineSeconds: Wall-clock limit of the whole job, after which the operator fails it.
      backoffLimit: Pod restarts the operator allows before it fails the job.
      ttlSecondsAfterFinished: How long a finished job (and its failed pods) stays for inspection.
      replicas: Settings per replica type, keyed `Chief`, `Worker` and `PS`.
      port: Port the replicas' gRPC servers listen on (the container port `tfjob-port`).
    """

    serviceAccountName: str
    activeDeadlineSeconds: int
    backoffLimit: int
    ttlSecondsAfterFinished: int
    replicas: dict[str, ReplicaSettings]
    port: int = DEFAULT_PORT

    def __post_init__(self) -> None:
        _require(
            set(self.replicas) == set(REPLICA_TYPES),
            'replicas',
            f'exactly the keys {list(REPLICA_TYPES)}',
            sorted(self.replicas),
        )
        for replica_type in REPLICA_TYPES:
            self.replicas[replica_type].check(f'replicas.{replica_type}', replica_type)
        _require(
            bool(self.serviceAccountName),
            'serviceAccountName',
            'a service account name',
            self.serviceAccountName,
        )
        _require(0 < self.port < 65536, 'port', 'a port number', self.port)
        for field in ('activeDeadlineSeconds', 'backoffLimit', 'ttlSecondsAfterFinished'):
            value = getattr(self, field)
            _require(value > 0, field, 'a positive integer', value)

    @property
    def service_account(self) -> str:
        """`serviceAccountName`, as the Kubernetes models call it."""
        return self.serviceAccountName


def load_tfjob_settings(path: str | os.PathLike[str]) -> TFJobSettings:
    """Reads and validates `kubeflow/tfjob-values.yaml` (or a copy a deployment edits).

    Raises:
      yaml_config.ConfigError: the file cannot be read, is not YAML, or a field is wrong; the
        message names the file and the field path.
    """
    return yaml_config.load(TFJobSettings, os.fspath(path), 'TFJob values')
