"""What the TFJob tests share: the repository's values file, one run's arguments, and its TFJob."""

from __future__ import annotations

from pathlib import Path

from kubeflow.training import models

from asynctrain.components.trainer import train_arguments
from asynctrain.components.trainer.kubernetes import tfjob as tfjob_lib
from asynctrain.components.trainer.kubernetes import values as values_lib
from tests.components.trainer.trainer_testdata import LABEL_KEY

REPO = Path(__file__).resolve().parents[4]
VALUES = REPO / 'asynctrain' / 'kubeflow' / 'tfjob-values.yaml'
RBAC = REPO / 'kubeflow' / 'rbac.yaml'
# The Kubernetes version whose OpenAPI schemas the manifests are validated against.
K8S_VERSION = '1.26.0'
TRAIN = train_arguments.TrainArguments(
    examples='gs://b/root/Transform/transformed_examples/7',
    transform_graph='gs://b/root/Transform/transform_graph/7',
    output='gs://b/root/Trainer/model/9',
    config='/etc/asynctrain/pipeline.yaml',
    label_key=LABEL_KEY,
)


def make_tfjob(name: str = 'taxi-train-9', namespace: str = 'ml') -> models.KubeflowOrgV1TFJob:
    """The TFJob `build_tfjob` makes from the repository's values file for `TRAIN`."""
    return tfjob_lib.build_tfjob(
        values_lib.load_tfjob_settings(VALUES),
        name=name,
        namespace=namespace,
        image='registry.example/asynctrain:1',
        train=TRAIN,
    )
