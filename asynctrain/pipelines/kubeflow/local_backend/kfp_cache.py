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
- only a task that succeeded is recorded (`launcher_v2.go`, `publish` with the fingerprint);
- `published`: an output as ML Metadata records it (`metadata.Client.RecordArtifact`,
  `toMLMDArtifact`) and as the driver rebuilds it for a consumer
  (`GetOutputArtifactsByExecutionId`, `OutputArtifact.ToRuntimeArtifact`, `toRuntimeArtifact`):
  named by its ML Metadata id, with an empty instance schema, not its producer's type.

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

from asynctrain.pipelines.kubeflow.compile import compiled_pipeline
from asynctrain.pipelines.kubeflow.local_backend import kfp_cluster, kfp_profiles

DEFAULT_PATH = os.path.join('runs', 'compiled', 'metadata.json')


def fingerprint(
    executor_input: dict[str, Any],
    component: compiled_pipeline.ComponentSpec,
    container: compiled_pipeline.ContainerSpec,
) -> str:
    """`GenerateCacheKey` + `GenerateFingerPrint` for the task given `executor_input`, its
    component and its container as compiled."""
    inputs = executor_input.get('inputs', {})
    outputs = executor_input.get('outputs', {})
    output_types = {
        name: compiled_pipeline.parameter_type(definition)
        for name, definition in component.output_definitions.parameters.items()
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
            'image': container.image,
            'cmdArgs': [*container.command, *container.args],
        },
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def _through_mlmd(value: Any) -> Any:
    """A metadata value as ML Metadata stores it (`StructValueToMLMDValue`) and
    `toRuntimeArtifact` reads it back: a number as a double, a string unchanged, a bool as 0/1,
    a list or a struct wrapped in a struct; a null is refused ("unknown/unsupported value
    type")."""
    if value is None:
        raise ValueError('unknown/unsupported value type *structpb.Value_NullValue')
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, list):
        return {'list': value}
    if isinstance(value, dict):
        return {'struct': value}
    return value


def store_session_info(
    uri: str, profile: kfp_profiles.KfpProfile, cluster: kfp_cluster.Cluster
) -> str:
    """The `store_session_info` custom property `RecordArtifact` adds (2.2+): the JSON of the
    run's `objectstore.SessionInfo` (`kfp_cluster.session_info`, from the cluster's
    `kfp-launcher` ConfigMap or the line's defaults). Go's `json.Marshal` writes a map's keys
    sorted."""
    session = kfp_cluster.session_info(uri, profile, cluster)
    session = {'Provider': session['Provider'], 'Params': dict(sorted(session['Params'].items()))}
    return json.dumps(session, separators=(',', ':'))


def published(
    artifact: dict[str, Any],
    artifact_id: int,
    output_name: str,
    profile: kfp_profiles.KfpProfile = kfp_profiles.KFP_2_17,
    session_info: str = '',
) -> dict[str, Any]:
    """The artifact as a downstream task receives it: named by its ML Metadata id, its
    metadata after the round trip through ML Metadata with the custom properties
    `RecordArtifact` adds (`display_name`, and `store_session_info` from 2.5), and the type
    `OutputArtifact.ToRuntimeArtifact` gives it: an instance schema of "" whatever the producer
    declared (`GetOutputArtifactsByExecutionId`: `Schema: ""`, "TODO(Bobgy): figure out how to
    get schema"). `session_info` is the run's (`kfp_driver.RunContext.store_session_info`); by
    default the one a cluster without a `kfp-launcher` ConfigMap gives the artifact's URI."""
    metadata = {k: _through_mlmd(v) for k, v in artifact.get('metadata', {}).items()}
    metadata.setdefault('display_name', output_name)
    if profile.store_session_info:
        session_info = session_info or store_session_info(
            artifact['uri'], profile, kfp_cluster.Cluster()
        )
        metadata.setdefault('store_session_info', session_info)
    return {
        'name': str(artifact_id),
        'uri': artifact['uri'],
        'type': {'instanceSchema': ''},
        'metadata': metadata,
    }


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
