"""The container entrypoint of every compiled asynctrain step on Kubeflow Pipelines: TFX's Kubeflow
V2 entrypoint (`kubeflow_v2_run_executor`), handed the ExecutorInput as open-source KFP 2.x's
driver and launcher really build it.

Stock TFX's entrypoint fails there in three ways (tensorflow/tfx#7768); this layer answers each,
then runs TFX's own `_run_executor` unchanged:

1. **Input types.** The driver rebuilds upstream artifacts from ML Metadata with an empty type
   (`instanceSchema: ""`, `backend/src/v2/metadata/client.go`), from which TFX cannot tell an
   artifact's class. Every artifact's type is taken from the compiled component's own
   definitions instead: its inputs from `--json_serialized_inputs_spec_args` (which TFX's
   compiler already writes), its outputs from `--json_serialized_outputs_spec_args` (added by
   `asynctrain compile`).
2. **KFP's own outputs.** From 2.5 on the driver adds an `executor-logs` output
   (`system.Artifact`) to every task, which TFX would try to import as a class. An output that
   the component does not define is the launcher's: TFX never sees it, and the executor output
   does not name it.
3. **Object-store URIs.** Artifact URIs are `gs://`, `s3://` or `minio://`; the launcher stages
   each input at a local path before the executor runs and uploads each output's local path after
   it (`kfp_storage`). TFX and Beam cannot open `minio://` at all. By default (`staged`) TFX is
   given those local paths: it then reads and writes the pod's disk, whatever the scheme, with no
   object-store client of its own. The executor output names the object-store URIs again (the
   launcher publishes the URI an executor writes, `mergeRuntimeArtifacts`), and so does every
   metadata value that named a local path.
   With `--artifact_access object_store` the executor gets the object-store URIs themselves
   (`minio://` as `s3://`, since MinIO speaks S3): for steps whose work runs outside this pod,
   where the pod's disk is out of reach (the Trainer's TFJob replicas, a Beam runner with remote
   workers). Nothing is then staged locally for that step's outputs, and the launcher uploads
   nothing (it allows an output with no local files).

4. **Execution properties on the store.** The data folder (`input_base`) and the push
   destination (`push_destination`) are parameters, which the launcher does not stage. On the
   1.16 line TensorFlow opens them where they are, through tensorflow-io's filesystem, imported
   here when a URI or an execution property needs it; a process that used it aborts at exit
   ("pure virtual method called"), so the step ends with `os._exit` and the executor's own exit
   status. On the 1.21 line TensorFlow has no `s3://` (`versions.HAS_TENSORFLOW_S3`): each such
   folder is pulled to the launcher's local path for it (`/s3/B/K`, `object_store.Mirror`)
   before the executor runs, the executor is given that path, what it wrote there (the pushed
   model) is pushed back after it, and the executor output names the URI again.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import traceback
from typing import Any

from asynctrain.components.shared import object_store, tf_environment
from asynctrain.pipelines.kubeflow.container import kfp_storage

ACCESS_MODES = ('staged', 'object_store')


def _object_store_uri(uri: str) -> str:
    """The URI a filesystem client opens for an artifact: `minio://B/K` as `s3://B/K`."""
    return 's3://' + uri[len('minio://') :] if uri.startswith('minio://') else uri


def executor_uri(uri: str, access: str) -> str:
    """The URI TFX is given for an artifact at `uri`: the launcher's local path (`staged`) or the
    object store's (`object_store`); a URI the launcher does not stage is left as it is."""
    if not kfp_storage.is_object_store_uri(uri):
        return uri
    if access == 'object_store':
        return _object_store_uri(uri)
    return kfp_storage.local_path_for_uri(uri)


def prepare_executor_input(
    executor_input: dict[str, Any],
    inputs_spec: dict[str, Any],
    outputs_spec: dict[str, Any],
    access: str,
) -> tuple[dict[str, Any], dict[str, str]]:
    """The ExecutorInput TFX's entrypoint is given, and the URI of each path it is given.

    Returns:
      (the ExecutorInput with every artifact typed by the component's definitions, KFP's own
      outputs left out and URIs as `executor_uri` gives them; executor URI -> published URI).

    Raises:
      ValueError: an input artifact the component does not define (its name and the defined ones).
    """
    result = json.loads(json.dumps(executor_input))
    published = {}
    sections = (
        ('inputs', inputs_spec.get('artifacts', {}), True),
        ('outputs', outputs_spec.get('artifacts', {}), False),
    )
    for section, definitions, strict in sections:
        artifacts = result.get(section, {}).get('artifacts', {})
        for key in list(artifacts):
            if key not in definitions:
                if strict:
                    raise ValueError(
                        f"input artifact {key!r} is not one of the component's inputs "
                        f'{sorted(definitions)}'
                    )
                del artifacts[key]  # The launcher's own (`executor-logs`).
                continue
            for artifact in artifacts[key].get('artifacts', []):
                artifact['type'] = definitions[key]['artifactType']
                uri = artifact.get('uri', '')
                artifact['uri'] = executor_uri(uri, access)
                published[artifact['uri']] = uri
    return result, published


_STORE_URI = re.compile(r's3://[^\s"\']+')


def mirror_parameters(executor_input: dict[str, Any], mirror: object_store.Mirror) -> list[str]:
    """Pulls each store folder that a `kfp_storage.STORE_PARAMETERS` parameter of
    `executor_input` names (where this line's TensorFlow cannot open it) and points the
    parameter at its local copy, in place; returns the URIs pulled."""
    values = executor_input.get('inputs', {}).get('parameterValues', {})
    pulled = []
    for name in kfp_storage.STORE_PARAMETERS:
        value = values.get(name)
        if not isinstance(value, str) or not object_store.needs_mirror(value):
            continue
        for uri in _STORE_URI.findall(value):
            value = value.replace(uri, mirror.pull(uri))
            pulled.append(uri)
        values[name] = value
    return pulled


def _published_value(value: Any, published: dict[str, str]) -> Any:
    """`value` with a leading executor path of an artifact replaced by that artifact's URI."""
    if isinstance(value, str):
        for path, uri in published.items():
            if path != uri and (value == path or value.startswith(path.rstrip('/') + '/')):
                return uri + value[len(path) :]
        return value
    if isinstance(value, list):
        return [_published_value(v, published) for v in value]
    if isinstance(value, dict):
        return {k: _published_value(v, published) for k, v in value.items()}
    return value


def publish_executor_output(
    executor_output: dict[str, Any],
    outputs: dict[str, Any],
    published: dict[str, str],
) -> dict[str, Any]:
    """The executor output with each output artifact at its object-store URI (`outputs`, the
    ExecutorInput's own outputs) and each metadata value that named an executor path naming the
    artifact's URI instead."""
    result = json.loads(json.dumps(executor_output))
    for key, entry in result.get('artifacts', {}).items():
        given = outputs.get(key, {}).get('artifacts', [])
        for index, artifact in enumerate(entry.get('artifacts', [])):
            if index < len(given) and given[index].get('uri'):
                artifact['uri'] = given[index]['uri']
            if 'metadata' in artifact:
                artifact['metadata'] = _published_value(artifact['metadata'], published)
    return result


def _parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(
        prog='python -m asynctrain.pipelines.kubeflow.container.kfp_entrypoint'
    )
    parser.add_argument('--executor_class_path', required=True)
    parser.add_argument('--json_serialized_invocation_args', required=True)
    parser.add_argument('--json_serialized_inputs_spec_args', default='{}')
    parser.add_argument('--json_serialized_outputs_spec_args', default='{}')
    parser.add_argument('--artifact_access', choices=ACCESS_MODES, default='staged')
    return parser.parse_known_args(argv)


def run(argv: list[str]) -> None:
    """Runs the step: the executor named by `--executor_class_path` through TFX's entrypoint,
    its output file rewritten to publish object-store URIs. Beam arguments follow, as for TFX."""
    args, beam_args = _parse_args(argv)
    executor_input = json.loads(args.json_serialized_invocation_args)
    inputs_spec = json.loads(args.json_serialized_inputs_spec_args)
    outputs_spec = json.loads(args.json_serialized_outputs_spec_args)
    prepared, published = prepare_executor_input(
        executor_input, inputs_spec, outputs_spec, args.artifact_access
    )
    mirror = object_store.Mirror(root=kfp_storage.STAGING_ROOTS['s3://'].rstrip('/'))
    mirrored = mirror_parameters(prepared, mirror)
    published.update({mirror.local(uri): uri for uri in mirrored})
    text = json.dumps(prepared)
    if not object_store.needs_mirror(text):
        tf_environment.register_filesystems([text])

    from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_run_executor

    tfx_args = argparse.Namespace(
        executor_class_path=args.executor_class_path,
        json_serialized_invocation_args=json.dumps(prepared),
        json_serialized_inputs_spec_args=args.json_serialized_inputs_spec_args,
    )
    kubeflow_v2_run_executor._run_executor(tfx_args, beam_args)  # noqa: SLF001 (TFX's entrypoint)
    for uri in mirrored:
        pushed = mirror.push(uri)
        if pushed:
            print(f'asynctrain: {pushed} file(s) pushed to {uri}', flush=True)

    output_file = executor_input['outputs']['outputFile']
    with open(output_file, encoding='utf-8') as f:
        written = json.load(f)
    rewritten = publish_executor_output(
        written, executor_input['outputs'].get('artifacts', {}), published
    )
    with open(output_file, 'w', encoding='utf-8') as f:
        json.dump(rewritten, f)
    print(f'asynctrain: executor output published to {output_file}', flush=True)


def main(argv: list[str]) -> None:
    """Runs the step and ends the process with its status, past tensorflow-io's abort at exit."""
    tf_environment.configure()
    code = 1
    try:
        run(argv)
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # The step's failure: its traceback is the pod's log.
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


if __name__ == '__main__':
    main(sys.argv[1:])
