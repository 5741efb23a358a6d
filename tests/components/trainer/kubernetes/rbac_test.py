"""Tests for kubeflow/rbac.yaml's Role: it grants exactly what a step's pod asks of the Kubernetes API.

The pods of a KFP run all use the run's service account: the drivers' pods and each step's pod,
where KFP's launcher runs the step. What they ask for is the table below, per KFP line, read in
kubeflow/pipelines at the tag (`v2/` is its `backend/src/v2/`), plus what asynctrain's Trainer
step asks for itself. A call that asynctrain's compiled pipeline never makes says why; the Role
must allow every other call and nothing that none of them needs.
"""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from tests.components.trainer.kubernetes.kubernetes_testdata import RBAC

# A name known only at run time (the step's own Pod): a rule for it cannot list resourceNames.
RUN_TIME_NAME = None
LAUNCHER_CONFIG_MAP = 'kfp-launcher'
STORE_SECRET = 'mlpipeline-minio-artifact'
# The Secret a `providers` entry of `kfp-launcher` names in its `secretRef`: the user's choice.
PROVIDERS_SECRET = '<providers secretRef>'
OBJECT_STORE = 'v2/objectstore/object_store.go'
CONFIG = 'v2/config/env.go'
LAUNCHER = 'v2/component/launcher_v2.go'
ONLY_PVC_TASKS = (
    "only kfp-kubernetes' CreatePVC and DeletePVC tasks, which asynctrain never compiles"
)


@dataclasses.dataclass(frozen=True)
class ApiCall:
    """One request to the Kubernetes API from a run's pod.

    Attributes:
      verb: the RBAC verb.
      group: the API group ('' for the core group).
      resource: the resource, plural.
      name: the object's name, or `RUN_TIME_NAME`.
      file: the file that makes the request.
      function: the function in `file` that makes it.
      via: the path to it from the driver's or launcher's entry, and when it is taken.
      unused_because: why a pipeline compiled by asynctrain never makes it; empty when it does.
    """

    verb: str
    group: str
    resource: str
    name: str | None
    file: str
    function: str
    via: str = ''
    unused_because: str = ''


def _pvc_calls(driver_file: str) -> tuple[ApiCall, ...]:
    return (
        ApiCall('create', '', 'persistentvolumeclaims', RUN_TIME_NAME, driver_file, 'createPVC',
                unused_because=ONLY_PVC_TASKS),
        ApiCall('get', '', 'persistentvolumeclaims', RUN_TIME_NAME, driver_file, 'deletePVC',
                unused_because=ONLY_PVC_TASKS),
        ApiCall('delete', '', 'persistentvolumeclaims', RUN_TIME_NAME, driver_file, 'deletePVC',
                unused_because=ONLY_PVC_TASKS),
        ApiCall('get', '', 'pods', RUN_TIME_NAME, driver_file, 'publishDriverExecution',
                via='its own Pod, for a Kubernetes-platform task', unused_because=ONLY_PVC_TASKS),
    )  # fmt: skip


def _providers_secret(function: str) -> ApiCall:
    return ApiCall('get', '', 'secrets', PROVIDERS_SECRET, OBJECT_STORE, function,
                   via='OpenBucket, for a bucket whose session info names that Secret',
                   unused_because='only with a `providers` secretRef; its name is added by hand')  # fmt: skip


KFP_CALLS: dict[str, tuple[ApiCall, ...]] = {
    '2.0.5': (
        ApiCall('get', '', 'configmaps', LAUNCHER_CONFIG_MAP, CONFIG, 'FromConfigMap',
                via='v2/driver/driver.go RootDAG, when the run names no pipeline root'),
        ApiCall('get', '', 'secrets', STORE_SECRET, OBJECT_STORE, 'getMinioCredential',
                via='launcher_v2.go Execute, OpenBucket, for a minio:// root'),
        *_pvc_calls('v2/driver/driver.go'),
    ),
    '2.5.0': (
        ApiCall('get', '', 'configmaps', LAUNCHER_CONFIG_MAP, CONFIG, 'FromConfigMap',
                via='v2/driver/driver.go RootDAG, every run'),
        ApiCall('get', '', 'secrets', STORE_SECRET, OBJECT_STORE, 'getS3BucketCredential',
                via='launcher_v2.go Execute, OpenBucket, createS3BucketSession, the Secret of the '
                    "run's store session info (v2/config/env.go getDefaultMinioSessionInfo)"),
        _providers_secret('getS3BucketCredential'),
        _providers_secret('getGCSTokenClient'),
        *_pvc_calls('v2/driver/driver.go'),
    ),
    '2.17.0': (
        ApiCall('get', '', 'configmaps', LAUNCHER_CONFIG_MAP, CONFIG, 'FromConfigMap',
                via='v2/driver/root_dag.go RootDAG, every run'),
        ApiCall('get', '', 'secrets', STORE_SECRET, OBJECT_STORE, 'getS3BucketCredential',
                via='launcher_v2.go Execute, OpenBucket, createS3BucketSession, the Secret of the '
                    "run's store session info (v2/config/env.go getDefaultMinioSessionInfo)"),
        _providers_secret('getS3BucketCredential'),
        _providers_secret('getGCSTokenClient'),
        ApiCall('get', '', 'pods', RUN_TIME_NAME, LAUNCHER, 'retryIndexFromPodAnnotation',
                via='qualifyExecutorLogsForRetry, its own Pod, when logs are published (the default) '
                    'and KFP_RETRY_INDEX is unset (every task without a retry policy)'),
        ApiCall('get', 'argoproj.io', 'workflows', RUN_TIME_NAME, 'v2/cmd/driver/main.go',
                'getCurrentWorkflowMetadata',
                unused_because='only for a {{$.pipeline_job_schedule_time_utc}} input, best-effort'),
        ApiCall('get', '', 'configmaps', LAUNCHER_CONFIG_MAP, 'v2/component/importer_launcher.go',
                'resolveBucketConfigForURI', via='FromConfigMap',
                unused_because='only importer tasks, which asynctrain never compiles'),
        *_pvc_calls('v2/driver/k8s.go'),
    ),
}  # fmt: skip
# What asynctrain's Trainer step asks for itself, with `distribution.cluster: tfjob`.
TRAINER_CLIENT = 'asynctrain/components/trainer/kubernetes/client.py'
ASYNCTRAIN_CALLS = tuple(
    ApiCall(verb, 'kubeflow.org', 'tfjobs', RUN_TIME_NAME, TRAINER_CLIENT, 'run_tfjob')
    for verb in ('create', 'get', 'delete')
) + (ApiCall('list', '', 'pods', RUN_TIME_NAME, TRAINER_CLIENT, 'failed_replicas'),)
NEEDED = tuple(
    call
    for calls in (*KFP_CALLS.values(), ASYNCTRAIN_CALLS)
    for call in calls
    if not call.unused_because
)


def _role() -> dict:
    (role,) = [d for d in yaml.safe_load_all(RBAC.read_text()) if d['kind'] == 'Role']
    return role


def _allows(rule: dict, call: ApiCall) -> bool:
    names = rule.get('resourceNames')
    return (
        call.group in rule['apiGroups']
        and call.resource in rule['resources']
        and call.verb in rule['verbs']
        and (not names or call.name in names)
    )


def _role_allows(call: ApiCall) -> bool:
    return any(_allows(rule, call) for rule in _role()['rules'])


def _grants(rule: dict) -> list[tuple[str, str, str, str | None]]:
    """Each (verb, group, resource, name) the rule allows; `RUN_TIME_NAME` for any name."""
    return [
        (verb, group, resource, name)
        for verb in rule['verbs']
        for group in rule['apiGroups']
        for resource in rule['resources']
        for name in rule.get('resourceNames') or [RUN_TIME_NAME]
    ]


def _key(call: ApiCall) -> tuple[str, str, str, str | None]:
    return (call.verb, call.group, call.resource, call.name)


@pytest.mark.parametrize('version', sorted(KFP_CALLS))
def test_the_role_allows_every_call_kfps_driver_and_launcher_make(version):
    refused = [c for c in KFP_CALLS[version] if not c.unused_because and not _role_allows(c)]

    assert refused == []


def test_the_role_allows_every_call_the_trainer_step_makes():
    assert [c for c in ASYNCTRAIN_CALLS if not _role_allows(c)] == []


def test_every_grant_of_the_role_is_a_call_some_version_makes():
    needed = {_key(call) for call in NEEDED}
    granted = [grant for rule in _role()['rules'] for grant in _grants(rule)]

    assert [grant for grant in granted if grant not in needed] == []
    assert sorted(set(granted), key=str) == sorted(needed, key=str)
    for rule in _role()['rules']:
        assert '*' not in rule['verbs'] + rule['resources'] + rule['apiGroups']


def test_calls_the_pipeline_never_makes_are_refused_unless_a_needed_call_shares_the_access():
    def shared(call: ApiCall) -> bool:
        return any(
            _key(n)[:3] == _key(call)[:3] and n.name in (RUN_TIME_NAME, call.name) for n in NEEDED
        )

    unused = [c for calls in KFP_CALLS.values() for c in calls if c.unused_because]

    assert [c.caller for c in unused if _role_allows(c) != shared(c)] == []
    refused = {(c.verb, c.resource) for c in unused if not _role_allows(c)}
    assert refused == {
        ('create', 'persistentvolumeclaims'),
        ('get', 'persistentvolumeclaims'),
        ('delete', 'persistentvolumeclaims'),
        ('get', 'workflows'),
        ('get', 'secrets'),  # the providers' own Secret, named by hand
    }


def test_what_changed_between_the_lines():
    def needed(version: str) -> set:
        return {_key(c) for c in KFP_CALLS[version] if not c.unused_because}

    assert needed('2.0.5') == needed('2.5.0')
    assert needed('2.17.0') - needed('2.5.0') == {('get', '', 'pods', RUN_TIME_NAME)}


def _rule_comments() -> list[str]:
    """The comment above each rule of the Role, in the order of its rules."""
    role_text = RBAC.read_text().split('kind: Role\n', 1)[1].split('\n---', 1)[0]
    rules_text = role_text.split('rules:\n', 1)[1]
    comments, current = [], []
    for line in rules_text.splitlines():
        stripped = line.strip()
        if stripped.startswith('#'):
            current.append(stripped.lstrip('# '))
        elif stripped.startswith('- apiGroups:'):
            comments.append(' '.join(current))
            current = []
    return comments


def test_each_rule_names_the_code_that_needs_it():
    rules = _role()['rules']
    comments = _rule_comments()
    assert len(comments) == len(rules)

    for rule, comment in zip(rules, comments):
        for call in NEEDED:
            if _allows(rule, call):
                assert call.file.rsplit('/', 1)[-1] in comment, (call, comment)
                assert call.function in comment, (call, comment)
