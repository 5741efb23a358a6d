"""How each KFP line's launcher reaches a `minio://` root: the endpoint and keys from what its
cluster holds (`kfp_cluster.Cluster`), never the step's environment. Each test names the Go
function (kubeflow/pipelines `backend/src/v2/`) whose behaviour it pins."""

from __future__ import annotations

import pytest

from asynctrain.pipelines.kubeflow.local_backend import kfp_cluster, kfp_profiles
from asynctrain.pipelines.kubeflow.local_backend.kfp_profiles import KFP_2_0, KFP_2_5, KFP_2_17

SECRET = {'mlpipeline-minio-artifact': {'accesskey': 'cluster-key', 'secretkey': 'cluster-secret'}}
# What the step's container has: another endpoint and other keys, in every variable a launcher
# could be thought to read.
STEP_ENVIRONMENT = {
    'AWS_ENDPOINT_URL': 'http://step-endpoint:9000',
    'AWS_ACCESS_KEY_ID': 'step-key',
    'AWS_SECRET_ACCESS_KEY': 'step-secret',
    'MINIO_SERVICE_SERVICE_HOST': 'step-minio',
    'MINIO_SERVICE_SERVICE_PORT': '9999',
}


@pytest.mark.parametrize(
    'profile, address',
    [
        # 2.0.5 object_store.go OpenBucket: MinioDefaultEndpoint(); 2.5.0 env.go
        # getDefaultMinioSessionInfo: MinioDefaultEndpoint(); 2.17.0: the constant
        # DefaultEndpointInMultiUserMode.
        (KFP_2_0, 'minio-service.kubeflow:9000'),
        (KFP_2_5, 'minio-service.kubeflow:9000'),
        (KFP_2_17, 'seaweedfs.kubeflow:9000'),
    ],
)
def test_the_steps_environment_is_not_what_the_launcher_uses(profile, address, monkeypatch):
    for name, value in STEP_ENVIRONMENT.items():
        monkeypatch.setenv(name, value)
    cluster = kfp_cluster.Cluster(secrets=SECRET, addresses={address: 'http://127.0.0.1:7001'})

    connection = kfp_cluster.store_connection('minio://b/root', profile, cluster)

    # Keys from the Secret through the Kubernetes API (getMinioCredential,
    # getS3BucketCredential: accesskey, secretkey), region "minio".
    assert connection == kfp_cluster.StoreConnection(
        address=address,
        endpoint_url='http://127.0.0.1:7001',
        access_key='cluster-key',
        secret_key='cluster-secret',
        region='minio',
    )


def test_the_namespaces_minio_service_is_the_endpoint_up_to_2_5_only():
    # MinioDefaultEndpoint (2.0.5, 2.5.0): MINIO_SERVICE_SERVICE_HOST:_PORT, Kubernetes'
    # service variables of the namespace, when both are set; gone by 2.15.0.
    cluster = kfp_cluster.Cluster(
        secrets=SECRET,
        service_variables={
            'MINIO_SERVICE_SERVICE_HOST': '10.0.0.7',
            'MINIO_SERVICE_SERVICE_PORT': '9000',
        },
    )
    addresses = [
        kfp_cluster.store_connection('minio://b/r', p, cluster).address
        for p in (KFP_2_0, KFP_2_5, KFP_2_17)
    ]
    assert addresses == ['10.0.0.7:9000', '10.0.0.7:9000', 'seaweedfs.kubeflow:9000']
    # An address the cluster's DNS model does not list is reached as itself, without TLS
    # (disableSSL true).
    assert kfp_cluster.store_connection('minio://b/r', KFP_2_0, cluster).endpoint_url == (
        'http://10.0.0.7:9000'
    )
    only_host = kfp_cluster.Cluster(
        secrets=SECRET, service_variables={'MINIO_SERVICE_SERVICE_HOST': '10.0.0.7'}
    )
    assert kfp_cluster.store_connection('minio://b/r', KFP_2_5, only_host).address == (
        'minio-service.kubeflow:9000'
    )


PROVIDERS = """
minio:
  default:
    endpoint: store.team.svc:9000
    region: eu
    credentials:
      fromEnv: false
      secretRef:
        secretName: team-store
        accessKeyKey: id
        secretKeyKey: key
"""


def test_the_kfp_launcher_config_maps_minio_provider_from_2_5():
    # env.go GetStoreSessionInfo (2.2+): providers.minio.default, S3ProviderConfig's endpoint,
    # region and secretRef; 2.0.5's OpenBucket reads no ConfigMap for it.
    cluster = kfp_cluster.Cluster(
        launcher_config={'providers': PROVIDERS},
        secrets={**SECRET, 'team-store': {'id': 'team-key', 'key': 'team-secret'}},
        addresses={'store.team.svc:9000': 'http://127.0.0.1:7002'},
    )
    for profile in (KFP_2_5, KFP_2_17):
        assert kfp_cluster.store_connection('minio://b/r', profile, cluster) == (
            kfp_cluster.StoreConnection(
                'store.team.svc:9000', 'http://127.0.0.1:7002', 'team-key', 'team-secret', 'eu'
            )
        )
    assert kfp_cluster.store_connection('minio://b/r', KFP_2_0, cluster).access_key == (
        'cluster-key'
    )


def test_a_missing_secret_fails_and_an_s3_root_takes_the_sdks_chain():
    # getMinioCredential: the Secret is read through the API, its absence fails the task;
    # s3.go ProvideSessionInfo with no providers entry: fromEnv, the SDK's own chain.
    with pytest.raises(ValueError, match='secrets "mlpipeline-minio-artifact" not found'):
        kfp_cluster.store_connection('minio://b/r', KFP_2_17, kfp_cluster.Cluster())
    empty = kfp_cluster.Cluster(secrets={'mlpipeline-minio-artifact': {'accesskey': 'a'}})
    with pytest.raises(ValueError, match='does not have "accesskey" or "secretkey" key'):
        kfp_cluster.store_connection('minio://b/r', KFP_2_0, empty)
    assert kfp_cluster.store_connection('s3://b/r', KFP_2_17, kfp_cluster.Cluster()) == (
        kfp_cluster.StoreConnection()
    )


@pytest.mark.parametrize('profile', list(kfp_profiles.PROFILES.values()))
def test_run_compiled_serves_the_lines_default_address_with_this_processes_keys(
    profile, monkeypatch
):
    # this_machine: read once at the edge; the address is the line's own default.
    monkeypatch.setenv('AWS_ENDPOINT_URL', 'http://127.0.0.1:7003')
    monkeypatch.setenv('AWS_ACCESS_KEY_ID', 'k')
    monkeypatch.setenv('AWS_SECRET_ACCESS_KEY', 's')
    cluster = kfp_cluster.this_machine(profile)
    assert cluster.addresses == {profile.minio_default_endpoint: 'http://127.0.0.1:7003'}
    assert cluster.secrets == {'mlpipeline-minio-artifact': {'accesskey': 'k', 'secretkey': 's'}}


def test_a_provider_entry_is_the_runs_session_info_with_each_lines_params():
    # config/minio.go MinioProviderConfig.ProvideSessionInfo -> s3.go S3ProviderConfig's:
    # the entry's endpoint and region, disableSSL false and forcePathStyle true unless given,
    # maxRetries 5 from 2.15, fromEnv and the secretRef's names; Provider minio.
    cluster = kfp_cluster.Cluster(launcher_config={'providers': PROVIDERS})
    common = {
        'endpoint': 'store.team.svc:9000',
        'region': 'eu',
        'disableSSL': 'false',
        'forcePathStyle': 'true',
        'fromEnv': 'false',
        'secretName': 'team-store',
        'accessKeyKey': 'id',
        'secretKeyKey': 'key',
    }
    assert kfp_cluster.session_info('minio://b/r', KFP_2_5, cluster) == {
        'Provider': 'minio',
        'Params': common,
    }
    assert kfp_cluster.session_info('minio://b/r', KFP_2_17, cluster) == {
        'Provider': 'minio',
        'Params': {**common, 'maxRetries': '5'},
    }
    given = PROVIDERS.replace('    region: eu\n', '    region: eu\n    disableSSL: true\n')
    params = kfp_cluster.session_info(
        'minio://b/r', KFP_2_17, kfp_cluster.Cluster(launcher_config={'providers': given})
    )['Params']
    assert params['disableSSL'] == 'true'


def test_without_a_provider_the_default_minio_session_names_the_lines_endpoint():
    # env.go getDefaultMinioSessionInfo: MinioDefaultEndpoint() on 2.5.0 (the namespace's
    # minio-service variables), DefaultMinioEndpointInMultiUserMode on 2.17.0; an s3:// root
    # without an entry: fromEnv true (s3.go ProvideSessionInfo).
    cluster = kfp_cluster.Cluster(
        service_variables={
            'MINIO_SERVICE_SERVICE_HOST': '10.0.0.7',
            'MINIO_SERVICE_SERVICE_PORT': '9000',
        }
    )
    endpoints = [
        kfp_cluster.session_info('minio://b/r', p, cluster)['Params']['endpoint']
        for p in (KFP_2_5, KFP_2_17)
    ]
    assert endpoints == ['10.0.0.7:9000', 'seaweedfs.kubeflow:9000']
    assert kfp_cluster.session_info('s3://b/r', KFP_2_17, cluster) == {
        'Provider': 's3',
        'Params': {'fromEnv': 'true'},
    }


def test_a_provider_entry_the_driver_cannot_use_is_refused():
    # s3.go: "invalid provider config: missing default credentials"; with fromEnv false the
    # driver reads the secretRef's names.
    no_credentials = 'minio:\n  default:\n    endpoint: store:9000\n'
    no_secret_ref = no_credentials + '    credentials:\n      fromEnv: false\n'
    for providers, message in (
        (no_credentials, 'missing default credentials'),
        (no_secret_ref, 'no secretRef is given'),
    ):
        cluster = kfp_cluster.Cluster(launcher_config={'providers': providers})
        with pytest.raises(ValueError, match=message):
            kfp_cluster.session_info('minio://b/r', KFP_2_17, cluster)
