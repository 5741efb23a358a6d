"""KFP's cache and the ML Metadata ids behind it, as `asynctrain run --compiled` keeps them from
one run to the next.

Open-source KFP 2.x caches every task whose `cachingOptions.enableCache` is set, which the SDKs
and TFX's compiler set by default. Read from kubeflow/pipelines `backend/src/v2/`:

- `driver/driver.go`, `getFingerPrint`, and `cacheutils/cache.go`, `GenerateCacheKey`: the key
  is the SHA-256 of the task's input artifacts by ML Metadata name (their ids: a new upstream
  execution gives new ones), its input parameter values, its output artifacts with their URIs
  wiped (name, type, metadata), its output parameters' types, and its image with command and
  arguments as compiled (placeholders unfilled);
- `driver.go`, `Container`: with the cache on and an execution of that key found for the same
  pipeline (`GetExecutionCache(fingerPrint, "pipeline/" + name, namespace)`), the launcher never
  runs; the task publishes that execution's output artifacts, the same ML Metadata artifacts
  (`reuseCachedOutputs`), so the tasks after it see the same ids and may hit the cache in turn;
- only a task that succeeded is recorded (`launcher_v2.go`, `publish` with the fingerprint).

Here the metadata is one JSON file per working directory (`runs/compiled/metadata.json`): the
next artifact id, and each succeeded execution's outputs by pipeline and key.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from typing import Any

DEFAULT_PATH = os.path.join('runs', 'compiled', 'metadata.json')


def fingerprint(
    executor_input: dict[str, Any], component: dict[str, Any], container: dict[str, Any]
) -> str:
    """`GenerateCacheKey` + `GenerateFingerPrint` for the task given `executor_input`."""
    inputs = executor_input.get('inputs', {})
    outputs = executor_input.get('outputs', {})
    output_types = {
        name: definition.get('parameterType', '')
        for name, definition in component.get('outputDefinitions', {}).get('parameters', {}).items()
    }
    key = {
        'inputArtifactNames': {
            name: [artifact.get('name', '') for artifact in artifacts.get('artifacts', [])]
            for name, artifacts in inputs.get('artifacts', {}).items()
        },
        'inputParameterValues': inputs.get('parameterValues', {}),
        'outputArtifactsSpec': {
            name: {k: v for k, v in artifacts['artifacts'][0].items() if k != 'uri'}
            for name, artifacts in outputs.get('artifacts', {}).items()
            if artifacts.get('artifacts')
        },
        'outputParametersSpec': {
            name: output_types[name] for name in outputs.get('parameters', {})
        },
        'containerSpec': {
            'image': container.get('image', ''),
            'cmdArgs': [*container.get('command', []), *container.get('args', [])],
        },
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


class MetadataStore:
    """The ids and cached executions of every compiled run in one working directory."""

    def __init__(self, state: dict[str, Any]):
        self._state = state

    def new_id(self) -> int:
        """A new ML Metadata artifact id, never given before in this store."""
        artifact_id = self._state['next_id']
        self._state['next_id'] += 1
        return artifact_id

    def cached(self, pipeline: str, key: str) -> dict[str, Any] | None:
        """The execution of `key` recorded for `pipeline`: its published `outputs` and output
        `parameters`; None when there is none."""
        return self._state['executions'].get(f'pipeline/{pipeline}', {}).get(key)

    def record(
        self,
        pipeline: str,
        key: str,
        outputs: dict[str, list[dict[str, Any]]],
        parameters: dict[str, Any],
    ) -> None:
        """Records a succeeded execution of `key`, for later runs of `pipeline` to reuse."""
        executions = self._state['executions'].setdefault(f'pipeline/{pipeline}', {})
        executions[key] = {'outputs': outputs, 'parameters': parameters}


@contextlib.contextmanager
def metadata_store(path: str = DEFAULT_PATH) -> Iterator[MetadataStore]:
    """The store at `path`, locked against another run in the same directory, written back on
    exit (also after a failed task: what succeeded before it stays recorded)."""
    os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
    with open(path + '.lock', 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        state = {'next_id': 1, 'executions': {}}
        if os.path.exists(path):
            with open(path, encoding='utf-8') as f:
                state = json.load(f)
        try:
            yield MetadataStore(state)
        finally:
            with open(path + '.tmp', 'w', encoding='utf-8') as f:
                json.dump(state, f)
            os.replace(path + '.tmp', path)
