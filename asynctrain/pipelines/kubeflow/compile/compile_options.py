"""What `asynctrain compile` is asked for, checked before TensorFlow or TFX is imported: the
target, the output file, the image and the pipeline root (`CompileOptions`), and the settings a
target cannot run (`check_target`). `kubeflow_runner` compiles with them."""

from __future__ import annotations

import dataclasses
import importlib.metadata

from asynctrain.components.shared import versions
from asynctrain.components.shared.yaml_config import ConfigError
from asynctrain.pipelines.config import PipelineConfig

TARGETS = ('kubeflow', 'vertex')
_EXTENSIONS = {'kubeflow': ('.yaml', '.yml'), 'vertex': ('.json',)}
# The image `KubeflowV2DagRunner` would use otherwise lacks this project's code.
DEFAULT_IMAGE_HINT = f'REGISTRY/asynctrain:TAG (built from {versions.DOCKERFILE})'


@dataclasses.dataclass(frozen=True)
class CompileOptions:
    """Runner settings that the pipeline definition does not hold.

    Attributes:
      target: `kubeflow` (PipelineSpec YAML) or `vertex` (PipelineJob JSON).
      output: File to write; `.yaml`/`.yml` for kubeflow, `.json` for vertex.
      image: Container image of every step (kubeflow/Dockerfile), e.g. `gcr.io/p/asynctrain:1`.
      pipeline_root: Where the steps write artifacts, e.g. `gs://bucket/asynctrain`; the cluster
        must be able to write there.
      beam_pipeline_args: Replace the config's Beam arguments for every Beam-based step when not
        None (e.g. `--runner=DataflowRunner`, `--project=...`).
    """

    target: str
    output: str
    image: str
    pipeline_root: str
    beam_pipeline_args: tuple[str, ...] | None = None

    def __post_init__(self):
        if self.target not in TARGETS:
            raise ValueError(f'target: {self.target!r} is not allowed; allowed: {list(TARGETS)}')
        if not self.output.endswith(_EXTENSIONS[self.target]):
            raise ValueError(
                f'output: the {self.target} target writes {" or ".join(_EXTENSIONS[self.target])} '
                f'files, got {self.output!r}'
            )
        if not self.image or ':' not in self.image.rsplit('/', 1)[-1] and '@' not in self.image:
            raise ValueError(
                f'image: expected a tagged image reference like {DEFAULT_IMAGE_HINT}, got {self.image!r}'
            )
        if not self.pipeline_root:
            raise ValueError('pipeline_root: required, e.g. gs://bucket/asynctrain')


def default_image() -> str:
    """`asynctrain:<installed version>` on the TFX 1.16 line, `asynctrain:<version>-tfx121` on
    1.21: a local tag of the line's image (kind, minikube), built from `versions.DOCKERFILE`."""
    return f'asynctrain:{importlib.metadata.version("asynctrain")}{versions.IMAGE_TAG_SUFFIX}'


def check_target(config: PipelineConfig, target: str) -> None:
    """ConfigError for a setting the target cannot run, named by its field."""
    if target == 'kubeflow' and config.retraining.analyzer_cache:
        raise ConfigError(
            'retraining.analyzer_cache: true needs an ML Metadata resolver task, which '
            'open-source Kubeflow Pipelines does not run ("resolver executors not implemented"); '
            'set it to false for --target kubeflow (local runs and --target vertex support it)'
        )
