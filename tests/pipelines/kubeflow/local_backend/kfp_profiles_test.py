"""The KFP lines `run --compiled --kfp-version` reproduces, field by field, each value with the Go
source (kubeflow/pipelines `backend/src/v2/`, at the profile's tag) it was read from."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from asynctrain.pipelines.kubeflow.local_backend import kfp_profiles
from asynctrain.pipelines.kubeflow.local_backend.kfp_profiles import KFP_2_0, KFP_2_5, KFP_2_17


def _row(field: str) -> tuple:
    return tuple(getattr(p, field) for p in (KFP_2_0, KFP_2_5, KFP_2_17))


def test_the_lines_and_their_tags_newest_by_default():
    assert list(kfp_profiles.PROFILES) == ['2.0', '2.5', '2.17']
    assert _row('source_tag') == ('2.0.5', '2.5.0', '2.17.0')
    assert kfp_profiles.profile() is KFP_2_17
    assert kfp_profiles.profile('2.0') is KFP_2_0
    assert KFP_2_0.describe() == 'KFP 2.0 (2.0.x, as Kubeflow 1.8 ships it; read from tag 2.0.5)'
    with pytest.raises(ValueError, match=r"--kfp-version: '2.3' is not one of 2.0, 2.5, 2.17"):
        kfp_profiles.profile('2.3')


def test_executor_logs_from_2_5_launcher_managed_from_2_16_1():
    # driver.go provisionOutputs(publishOutput): absent in 2.0.5, there in 2.5.0 with
    # cmd/driver/main.go's --publish_logs default "true"; launcher_v2.go
    # qualifyExecutorLogsForRetry in 2.17.0.
    assert _row('executor_logs') == (False, True, True)
    assert _row('executor_logs_launcher_managed') == (False, False, True)
    assert _row('upload_logs_of_failed_task') == (False, False, True)


def test_output_uris_names_and_metadata_file():
    # provisionOutputs: outputURISalt from 2.4/2.5; Name and the output file under the task
    # root from 2.15.0.
    assert _row('output_uri_salt') == (False, True, True)
    assert _row('output_names') == (False, False, True)
    assert _row('output_metadata_in_task_root') == (False, False, True)
    assert kfp_profiles.LEGACY_OUTPUT_METADATA_FILE == '/tmp/kfp_outputs/output_metadata.json'
    assert kfp_profiles.OUTPUT_PARAMETERS_DIR == '/tmp/kfp/outputs'


def test_run_placeholders_none_then_five_then_seven():
    # driver.go resolveInputs (2.0.5) passes constants through; resolveInputParameter (2.5.0)
    # switches on five names; resolve.go (2.16.0+) adds the two times.
    assert KFP_2_0.run_placeholders == ()
    assert KFP_2_5.run_placeholders == (
        '{{$.pipeline_job_name}}',
        '{{$.pipeline_job_resource_name}}',
        '{{$.pipeline_job_uuid}}',
        '{{$.pipeline_task_name}}',
        '{{$.pipeline_task_uuid}}',
    )
    assert KFP_2_17.run_placeholders == (
        *KFP_2_5.run_placeholders,
        '{{$.pipeline_job_create_time_utc}}',
        '{{$.pipeline_job_schedule_time_utc}}',
    )


def test_ml_metadata_parameters_downloads_and_placeholders():
    # metadata/client.go RecordArtifact: store_session_info from 2.2.
    assert _row('store_session_info') == (False, True, True)
    # config/env.go getDefaultMinioSessionInfo: minio-service, then seaweedfs (2.16), maxRetries
    # (2.15).
    endpoints = [dict(p.minio_session_params).get('endpoint') for p in (KFP_2_0, KFP_2_5, KFP_2_17)]
    assert endpoints == [None, 'minio-service.kubeflow:9000', 'seaweedfs.kubeflow:9000']
    assert [dict(p.minio_session_params).get('maxRetries') for p in (KFP_2_5, KFP_2_17)] == [
        None,
        '5',
    ]
    # handleParamTypeValidationAndConversion: the struct types.
    assert _row('struct_parameter_types') == (
        ('STRUCT',),
        ('STRUCT',),
        ('STRUCT', 'TASK_FINAL_STATUS', 'TASK_CONFIG'),
    )
    # objectstore/object_store.go isBlobKeyUnderPrefix (2.17.0).
    assert _row('download_keys_under_prefix_only') == (False, False, True)
    # launcher_v2.go executeV2 (2.5.0) / compileCmdAndArgs (2.14+).
    assert _row('command_placeholders') == (True, True, False)


def test_driver_side_arguments_and_the_launchers_store_endpoint():
    # driver.go initPodSpecPatch -> util.go resolveContainerArgs, first in 2.17.0.
    assert _row('driver_fills_input_parameters') == (False, False, True)
    # objectstore MinioDefaultEndpoint (2.0.5 object_store.go, 2.5.0 config.go: the service
    # variables, else minio-service); 2.17.0 config.go DefaultEndpointInMultiUserMode.
    assert _row('minio_default_endpoint') == (
        'minio-service.kubeflow:9000',
        'minio-service.kubeflow:9000',
        'seaweedfs.kubeflow:9000',
    )
    assert _row('minio_endpoint_from_service_variables') == (True, True, False)
    # config/env.go GetStoreSessionInfo reads the kfp-launcher ConfigMap's providers (2.2+).
    assert _row('launcher_config_providers') == (False, True, True)


def test_every_field_is_documented():
    # cleandoc: Python 3.13's compiler strips a docstring's common indentation itself, 3.10's
    # does not (https://docs.python.org/3.13/whatsnew/3.13.html#other-language-changes).
    doc = inspect.cleandoc(kfp_profiles.KfpProfile.__doc__)
    for field in dataclasses.fields(kfp_profiles.KfpProfile):
        assert f'\n  {field.name}: ' in doc, field.name
