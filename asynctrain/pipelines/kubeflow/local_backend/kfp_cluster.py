"""What a KFP launcher reads from its cluster, not from the step's environment, to reach the
object store: the `kfp-launcher` ConfigMap, the `mlpipeline-minio-artifact` Secret (through the
Kubernetes API) and the namespace's service addresses, one small model of them per run.

A `minio://` root is opened with an endpoint and keys the launcher finds so
(kubeflow/pipelines `backend/src/v2/`):

- 2.0.5: `objectstore/object_store.go` `OpenBucket` with `MinioDefaultEndpoint()` (the
  `MINIO_SERVICE_SERVICE_HOST`/`_PORT` variables Kubernetes gives every pod of a namespace that
  has a `minio-service`, else `minio-service.kubeflow:9000`) and `getMinioCredential` (the
  Secret's `accesskey` and `secretkey`); the ConfigMap's `providers` are not read;
- 2.5.0: the session info the root DAG driver builds once per run and records in ML Metadata,
  which each launcher reads back (`component/launcher_v2.go` `Execute`), from
  `config/env.go` `GetStoreSessionInfo`: the ConfigMap's `providers.minio.default` when
  it has one (`config/s3.go` `S3ProviderConfig`: `endpoint`, `credentials.secretRef`), else
  `getDefaultMinioSessionInfo` (endpoint `objectstore.MinioDefaultEndpoint()`, as 2.0.5); keys
  from the Secret the session names (`objectstore.getS3BucketCredential`);
- 2.17.0: the same, the default endpoint being the constant
  `objectstore.DefaultEndpointInMultiUserMode`, `seaweedfs.kubeflow:9000`: no variable is read.

The step's own variables (`AWS_ENDPOINT_URL` and the rest, the container's `env`) are never
consulted for a `minio://` root. An `s3://` root without a `providers` entry is opened with the
SDK's own credential chain (`fromEnv` true, `config/s3.go` `ProvideSessionInfo`), which this
machine's process environment stands for.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import yaml

from asynctrain.pipelines.kubeflow.local_backend import kfp_profiles

MINIO_SECRET = 'mlpipeline-minio-artifact'
# The Kubernetes service variables `MinioDefaultEndpoint` reads (2.0.5, 2.5.0; not 2.15.0).
MINIO_SERVICE_VARIABLES = ('MINIO_SERVICE_SERVICE_HOST', 'MINIO_SERVICE_SERVICE_PORT')


@dataclasses.dataclass(frozen=True)
class Cluster:
    """The Kubernetes objects a launcher reads, in a run's namespace.

    Attributes:
      launcher_config: The `kfp-launcher` ConfigMap's data (`defaultPipelineRoot`, `providers`
        as the YAML text the ConfigMap holds); empty where the namespace has none.
      secrets: Secret name -> its data (`mlpipeline-minio-artifact`: `accesskey`, `secretkey`).
      service_variables: The service variables Kubernetes sets in the namespace's pods
        (`MINIO_SERVICE_SERVICE_HOST`/`_PORT` where a `minio-service` is in the namespace).
      addresses: A cluster address (`host:port`) -> the URL that reaches it from this machine,
        standing for the cluster's DNS; an address not listed is reached as `http://host:port`.
    """

    launcher_config: dict[str, str] = dataclasses.field(default_factory=dict)
    secrets: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    service_variables: dict[str, str] = dataclasses.field(default_factory=dict)
    addresses: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class StoreConnection:
    """How the launcher opens a root's bucket.

    Attributes:
      address: The endpoint as the launcher names it (`host:port`), '' for the SDK's default.
      endpoint_url: The URL this machine reaches it at; '' for the SDK's default chain.
      access_key: The access key; '' for the SDK's default chain.
      secret_key: The secret key; '' for the SDK's default chain.
      region: The region the session names.
    """

    address: str = ''
    endpoint_url: str = ''
    access_key: str = ''
    secret_key: str = ''
    region: str = ''


def minio_default_endpoint(profile: kfp_profiles.KfpProfile, cluster: Cluster) -> str:
    """`objectstore.MinioDefaultEndpoint` (2.0.5, 2.5.0: the namespace's service variables,
    else the profile's default) or 2.17.0's constant `DefaultEndpointInMultiUserMode`."""
    host, port = (cluster.service_variables.get(v, '') for v in MINIO_SERVICE_VARIABLES)
    if profile.minio_endpoint_from_service_variables and host and port:
        return f'{host}:{port}'
    return profile.minio_default_endpoint


def _minio_provider(profile: kfp_profiles.KfpProfile, cluster: Cluster) -> dict[str, Any]:
    """The ConfigMap's `providers.minio` (`default`, `Overrides`; `GetStoreSessionInfo`, 2.2+),
    `{}` if none or if both are absent (`MinioProviderConfig.ProvideSessionInfo` then takes the
    default session)."""
    text = cluster.launcher_config.get('providers', '')
    if not profile.launcher_config_providers or not text:
        return {}
    minio = (yaml.safe_load(text) or {}).get('minio') or {}
    return minio if minio.get('default') or minio.get('Overrides') else {}


def _secret_keys(cluster: Cluster, name: str, access_key: str, secret_key: str) -> tuple[str, str]:
    """`getMinioCredential`, `getS3BucketCredential`: the two keys of a Secret.

    Raises:
      ValueError: the Secret or one of its keys is missing (the launcher's words).
    """
    data = cluster.secrets.get(name)
    if data is None:
        raise ValueError(f'failed to get MinIO credential: secrets "{name}" not found')
    if not data.get(access_key) or not data.get(secret_key):
        raise ValueError(
            f'failed to get MinIO credential from secret name="{name}": does not have '
            f'"{access_key}" or "{secret_key}" key, or they are empty'
        )
    return data[access_key], data[secret_key]


def session_info(root: str, profile: kfp_profiles.KfpProfile, cluster: Cluster) -> dict[str, Any]:
    """The `objectstore.SessionInfo` of `root` (`Provider`, `Params`) as the root DAG driver
    builds it from the cluster (`config/env.go` `GetStoreSessionInfo`, 2.2+), which ML Metadata
    records on every artifact (`store_session_info`) and each launcher opens the bucket with.

    A `minio://` root with a `providers.minio.default` entry in the `kfp-launcher` ConfigMap gets
    `S3ProviderConfig.ProvideSessionInfo`'s Params under Provider `minio` (`config/minio.go`,
    `config/s3.go`: the entry's endpoint and region, `disableSSL` false and `forcePathStyle`
    true unless given, `maxRetries` 5 from 2.15, `fromEnv`, and the secretRef's three names);
    without one, `getDefaultMinioSessionInfo` (the profile's `minio_session_params`, its
    endpoint `minio_default_endpoint`). Any other scheme without a provider entry: `fromEnv`
    true, the SDK's own chain. Overrides (`providers.*.Overrides`) are not modelled.

    Raises:
      ValueError: a provider entry without credentials or (with `fromEnv` false) a secretRef,
        which the driver refuses ("invalid provider config: missing default credentials") or
        cannot read; or one with Overrides.
    """
    scheme = root.split('://', 1)[0]
    if scheme != 'minio':
        return {'Provider': scheme, 'Params': {'fromEnv': 'true'}}
    provider = _minio_provider(profile, cluster)
    if not provider:
        params = dict(profile.minio_session_params)
        params['endpoint'] = minio_default_endpoint(profile, cluster)
        return {'Provider': 'minio', 'Params': params}
    return {'Provider': 'minio', 'Params': _provider_params(provider, profile)}


def _provider_params(provider: dict[str, Any], profile: kfp_profiles.KfpProfile) -> dict[str, str]:
    """`S3ProviderConfig.ProvideSessionInfo`'s Params for a `default` entry; Go's
    `strconv.FormatBool` writes booleans as `true`/`false`."""
    if provider.get('Overrides'):
        raise ValueError('kfp-launcher providers.minio.Overrides are not modelled')
    default = provider.get('default') or {}
    credentials = default.get('credentials')
    if not credentials:
        raise ValueError('invalid provider config: missing default credentials')
    params = {
        'endpoint': str(default.get('endpoint', '')),
        'region': str(default.get('region', '')),
        'disableSSL': _go_bool(default.get('disableSSL', False)),
        'forcePathStyle': _go_bool(default.get('forcePathStyle', True)),
        'fromEnv': _go_bool(credentials.get('fromEnv', False)),
    }
    # maxRetries joins the Params in the same release as the default session's (2.15).
    if 'maxRetries' in dict(profile.minio_session_params):
        params['maxRetries'] = str(int(default.get('maxRetries', 5)))
    if params['fromEnv'] == 'false':
        secret_ref = credentials.get('secretRef')
        if not secret_ref:
            raise ValueError(
                'kfp-launcher providers.minio.default.credentials: fromEnv is false and no '
                'secretRef is given (the driver reads its secretName, accessKeyKey, secretKeyKey)'
            )
        for key in ('secretName', 'accessKeyKey', 'secretKeyKey'):
            params[key] = str(secret_ref.get(key, ''))
    return params


def _go_bool(value: Any) -> str:
    return 'true' if value is True or str(value).lower() == 'true' else 'false'


def store_connection(
    root: str, profile: kfp_profiles.KfpProfile, cluster: Cluster
) -> StoreConnection:
    """How the profile's launcher opens the bucket of `root`; see the module docstring: from
    2.5 the run's `session_info`, on 2.0.5 `MinioDefaultEndpoint` and the default Secret.

    Raises:
      ValueError: a `minio://` provider that reads keys from the environment (not modelled),
        a provider entry the driver refuses, or a Secret the launcher cannot read.
    """
    if not root.startswith('minio://'):
        return StoreConnection()  # fromEnv: the SDK's own chain.
    if profile.launcher_config_providers:
        params = session_info(root, profile, cluster)['Params']
    else:
        params = {
            'endpoint': minio_default_endpoint(profile, cluster),
            'region': 'minio',
            'fromEnv': 'false',
            'secretName': MINIO_SECRET,
            'accessKeyKey': 'accesskey',
            'secretKeyKey': 'secretkey',
        }
    if params['fromEnv'] == 'true':
        raise ValueError('kfp-launcher providers.minio.default.credentials.fromEnv is not modelled')
    address = params['endpoint']
    access_key, secret_key = _secret_keys(
        cluster, params['secretName'], params['accessKeyKey'], params['secretKeyKey']
    )
    return StoreConnection(
        address=address,
        endpoint_url=cluster.addresses.get(address, f'http://{address}'),
        access_key=access_key,
        secret_key=secret_key,
        region=params['region'],
    )


def s3_client(connection: StoreConnection) -> Any:
    """A boto3 client as the launcher opens the bucket: the connection's endpoint and keys, or
    the SDK's default chain where it names none (`fromEnv`)."""
    import boto3  # Only a run that stages anything needs it.

    if not connection.endpoint_url:
        return boto3.client('s3')
    return boto3.client(
        's3',
        endpoint_url=connection.endpoint_url,
        aws_access_key_id=connection.access_key,
        aws_secret_access_key=connection.secret_key,
        region_name=connection.region or None,
    )


def this_machine(profile: kfp_profiles.KfpProfile) -> Cluster:
    """The cluster `run --compiled` gives its launcher: the profile's default MinIO address
    served by this machine's S3 endpoint, and the Secret holding this process's keys, both read
    once here, at the edge, from boto3's standard variables; the steps keep their own."""
    endpoint = os.environ.get('AWS_ENDPOINT_URL', '')
    return Cluster(
        secrets={
            MINIO_SECRET: {
                'accesskey': os.environ.get('AWS_ACCESS_KEY_ID', ''),
                'secretkey': os.environ.get('AWS_SECRET_ACCESS_KEY', ''),
            }
        },
        addresses={profile.minio_default_endpoint: endpoint} if endpoint else {},
    )
