"""What the open-source Kubeflow Pipelines 2.x backend refuses in a PipelineSpec, with its reasons.

Read from the backend's own source (kubeflow/pipelines, `backend/src/`), every 2.x release:

- the API server stores only schema 2.1.0 (`apiserver/template/v2_template.go`);
- its compiler turns only container and importer executors into Argo templates
  (`v2/compiler/visitor.go`; a `resolver`, which Vertex AI runs, is refused in
  `v2/compiler/argocompiler/dag.go`);
- its driver resolves a task's parameter from `runtimeValue.constant`, a task output or a
  pipeline input; the legacy `runtimeValue.constantValue` is "not implemented"
  (`v2/driver/resolve.go`; `v2/driver/driver.go` up to 2.5), and it hands the executor
  `parameterValues` only.

`asynctrain compile` checks what it writes with `refusals`, and `asynctrain run --compiled`
refuses such a pipeline before running anything, each with the backend's reason.
"""

from __future__ import annotations

import dataclasses
from typing import Any

SCHEMA_VERSION = '2.1.0'
EXECUTOR_KINDS = ('container', 'importer')


@dataclasses.dataclass(frozen=True)
class Refusal:
    """One thing the backend refuses.

    Attributes:
      where: The document's field, e.g. `deploymentSpec.executors.X`.
      reason: The backend's own message.
      source: The backend file that refuses it.
    """

    where: str
    reason: str
    source: str

    def __str__(self) -> str:
        return f'{self.where}: {self.reason} (KFP backend, {self.source})'


class PipelineRefused(ValueError):
    """Open-source KFP would refuse the compiled pipeline; the message lists every reason."""

    def __init__(self, refusals: list[Refusal]):
        self.refusals = refusals
        super().__init__(
            'open-source Kubeflow Pipelines would refuse this pipeline:\n'
            + '\n'.join(f'  {r}' for r in refusals)
        )


def _dags(document: dict[str, Any]):
    """(path, dag) of the root DAG and of every sub-DAG component."""
    yield 'root.dag', document.get('root', {}).get('dag', {})
    for name, component in document.get('components', {}).items():
        if 'dag' in component:
            yield f'components.{name}.dag', component['dag']


def refusals(document: dict[str, Any]) -> list[Refusal]:
    """Every reason the backend would refuse `document` (a PipelineSpec as a dict); [] when
    none."""
    found = []
    version = document.get('schemaVersion', '')
    if version != SCHEMA_VERSION:
        found.append(
            Refusal(
                'schemaVersion',
                f'KFP only supports schema version {SCHEMA_VERSION}, but the pipeline spec has '
                f'version {version}',
                'backend/src/apiserver/template/v2_template.go',
            )
        )
    executors = document.get('deploymentSpec', {}).get('executors', {})
    for label, executor in sorted(executors.items()):
        kinds = set(executor) & {'container', 'importer', 'resolver', 'customJob'}
        if kinds & set(EXECUTOR_KINDS):
            continue
        if 'resolver' in executor:
            found.append(
                Refusal(
                    f'deploymentSpec.executors.{label}',
                    'resolver executors not implemented',
                    'backend/src/v2/compiler/argocompiler/dag.go',
                )
            )
        else:
            found.append(
                Refusal(
                    f'deploymentSpec.executors.{label}',
                    f'executor(label="{label}"): non-container and non-importer executor not '
                    'implemented',
                    'backend/src/v2/compiler/visitor.go',
                )
            )
    for path, dag in _dags(document):
        for task_name, task in sorted(dag.get('tasks', {}).items()):
            for name, parameter in sorted(task.get('inputs', {}).get('parameters', {}).items()):
                runtime_value = parameter.get('runtimeValue', {})
                if 'constantValue' in runtime_value:
                    found.append(
                        Refusal(
                            f'{path}.tasks.{task_name}.inputs.parameters.{name}',
                            'param runtime value spec of type '
                            '*pipelinespec.ValueOrRuntimeParameter_ConstantValue not implemented',
                            'backend/src/v2/driver/resolve.go',
                        )
                    )
    return found


def check(document: dict[str, Any]) -> None:
    """Raises PipelineRefused when open-source KFP would refuse `document`."""
    found = refusals(document)
    if found:
        raise PipelineRefused(found)
