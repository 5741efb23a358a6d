"""Tests for asynctrain/pipelines/kubeflow/compile/schedule.py (`asynctrain schedule`).

No KFP server can run here, so kfp's real client talks to a fake KFP v2beta1 REST API on
127.0.0.1 that records every request (method, path, query, body, uploaded file) and answers the
way the KFP API server does for the calls `schedule` makes.
"""

from __future__ import annotations

import argparse
import email
import http.server
import json
import threading
import urllib.parse

import kfp
import pytest

from asynctrain.pipelines.kubeflow.compile import schedule as schedule_lib

PIPELINE_YAML = """\
# PIPELINE DEFINITION
# Name: taxi-daily
components: {}
deploymentSpec: {}
pipelineInfo:
  name: taxi-daily
root:
  dag:
    tasks: {}
schemaVersion: 2.1.0
sdkVersion: tfx-1.16.0
"""


class _FakeKfpApi(http.server.BaseHTTPRequestHandler):
    def _reply(self, body: dict) -> None:
        code = body.get('code', 200)
        data = json.dumps(body).encode()
        self.send_response(200 if code == 200 else 403)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _handle(self) -> None:
        length = int(self.headers.get('Content-Length') or 0)
        raw = self.rfile.read(length) if length else b''
        parsed = urllib.parse.urlparse(self.path)
        content_type = self.headers.get('Content-Type', '')
        body, upload = None, None
        if content_type.startswith('multipart/form-data'):
            message = email.message_from_bytes(
                b'Content-Type: ' + content_type.encode() + b'\r\n\r\n' + raw
            )
            (part,) = message.get_payload()
            upload = (
                part.get_param('name', header='content-disposition'),
                part.get_payload(decode=True).decode(),
            )
        elif raw:
            body = json.loads(raw)
        query = {k: v[0] for k, v in urllib.parse.parse_qs(parsed.query).items()}
        self.server.requests.append(
            {
                'method': self.command,
                'path': parsed.path,
                'query': query,
                'body': body,
                'upload': upload,
            }
        )
        self._reply(self.server.answers.get((self.command, parsed.path), {}))

    do_GET = do_POST = _handle

    def log_message(self, *args):
        pass


@pytest.fixture
def kfp_server(monkeypatch, tmp_path):
    # kfp.Client reads ~/.config/kfp/context.json and KF_PIPELINES_* variables; isolate both.
    monkeypatch.setattr(kfp.Client, '_LOCAL_KFP_CONTEXT', str(tmp_path / 'context.json'))
    for name in (
        'KF_PIPELINES_ENDPOINT',
        'KF_PIPELINES_UI_ENDPOINT',
        'KF_PIPELINES_IAP_OAUTH2_CLIENT_ID',
    ):
        monkeypatch.delenv(name, raising=False)
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), _FakeKfpApi)
    server.requests = []
    server.answers = {
        ('GET', '/apis/v2beta1/healthz'): {'multi_user': False},
        ('POST', '/apis/v2beta1/experiments'): {
            'experiment_id': 'exp-1',
            'display_name': 'asynctrain',
        },
        ('POST', '/apis/v2beta1/recurringruns'): {'recurring_run_id': 'rr-1'},
    }
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def pipeline_file(tmp_path):
    path = tmp_path / 'pipeline.yaml'
    path.write_text(PIPELINE_YAML)
    return path


def _args(server, pipeline_file, *extra):
    parser = argparse.ArgumentParser()
    schedule_lib.add_arguments(parser)
    return parser.parse_args(
        [
            '--host',
            f'http://127.0.0.1:{server.server_port}',
            '--cron',
            '0 0 3 * * *',
            '--pipeline',
            str(pipeline_file),
            *extra,
        ]
    )


def _only(server, method, path):
    (request,) = [r for r in server.requests if r['method'] == method and r['path'] == path]
    return request


def test_schedule_uploads_a_new_pipeline_and_creates_a_daily_recurring_run(
    kfp_server, pipeline_file, capsys
):
    kfp_server.answers[('POST', '/apis/v2beta1/pipelines/upload')] = {
        'pipeline_id': 'pipe-1',
        'display_name': 'taxi-daily',
    }
    kfp_server.answers[('GET', '/apis/v2beta1/pipelines/pipe-1/versions')] = {
        'pipeline_versions': [{'pipeline_id': 'pipe-1', 'pipeline_version_id': 'ver-1'}]
    }

    assert (
        schedule_lib.run(
            _args(kfp_server, pipeline_file, '--service-account', 'asynctrain-pipeline')
        )
        == 0
    )

    upload = _only(kfp_server, 'POST', '/apis/v2beta1/pipelines/upload')
    assert upload['query']['name'] == 'taxi-daily'  # from the file's pipelineInfo
    assert upload['upload'] == ('uploadfile', PIPELINE_YAML)
    lookup = _only(kfp_server, 'GET', '/apis/v2beta1/pipelines')
    assert json.loads(lookup['query']['filter'])['predicates'][0]['stringValue'] == 'taxi-daily'
    recurring = _only(kfp_server, 'POST', '/apis/v2beta1/recurringruns')['body']
    assert recurring['trigger'] == {'cron_schedule': {'cron': '0 0 3 * * *'}}
    assert recurring['max_concurrency'] == 1
    assert recurring['no_catchup'] is True
    assert recurring['mode'] == 'ENABLE'
    assert recurring['pipeline_version_reference'] == {
        'pipeline_id': 'pipe-1',
        'pipeline_version_id': 'ver-1',
    }
    assert 'pipeline_spec' not in recurring  # the run refers to the uploaded version, not a copy
    assert recurring['experiment_id'] == 'exp-1'
    assert recurring['display_name'] == 'taxi-daily-daily'
    assert recurring['service_account'] == 'asynctrain-pipeline'
    assert 'recurring run rr-1: pipeline pipe-1 version ver-1' in capsys.readouterr().out


def test_schedule_adds_a_version_to_an_existing_pipeline_and_reuses_the_experiment(
    kfp_server, pipeline_file
):
    kfp_server.answers[('GET', '/apis/v2beta1/pipelines')] = {
        'pipelines': [{'pipeline_id': 'pipe-7', 'display_name': 'taxi-daily'}]
    }
    kfp_server.answers[('POST', '/apis/v2beta1/pipelines/upload_version')] = {
        'pipeline_id': 'pipe-7',
        'pipeline_version_id': 'ver-8',
    }
    kfp_server.answers[('GET', '/apis/v2beta1/experiments')] = {
        'experiments': [{'experiment_id': 'exp-5', 'display_name': 'nightly'}]
    }
    client = kfp.Client(host=f'http://127.0.0.1:{kfp_server.server_port}')

    created = schedule_lib.schedule(
        client,
        pipeline_file=str(pipeline_file),
        cron='0 30 2 * * MON-FRI',
        experiment='nightly',
        version_name='v20261129',
    )

    assert created == schedule_lib.RecurringRun('rr-1', 'pipe-7', 'ver-8', 'exp-5')
    upload = _only(kfp_server, 'POST', '/apis/v2beta1/pipelines/upload_version')
    assert upload['query'] == {'name': 'v20261129', 'pipelineid': 'pipe-7'}
    assert upload['upload'] == ('uploadfile', PIPELINE_YAML)
    assert not [
        r
        for r in kfp_server.requests
        if r['path'] in ('/apis/v2beta1/pipelines/upload', '/apis/v2beta1/experiments')
        and r['method'] == 'POST'
    ]
    recurring = _only(kfp_server, 'POST', '/apis/v2beta1/recurringruns')['body']
    assert recurring['trigger']['cron_schedule']['cron'] == '0 30 2 * * MON-FRI'
    assert recurring['pipeline_version_reference'] == {
        'pipeline_id': 'pipe-7',
        'pipeline_version_id': 'ver-8',
    }
    assert (recurring['max_concurrency'], recurring['no_catchup'], recurring['experiment_id']) == (
        1,
        True,
        'exp-5',
    )


@pytest.mark.parametrize(
    'cron, message',
    [
        ('0 3 * * *', '--cron needs 6 space-separated fields'),
        ('@daily', '--cron needs 6 space-separated fields'),
        ('60 0 3 * * *', "field second '60': 60 is out of range 0-59"),
        ('0 0 24 * * *', "field hour '24': 24 is out of range 0-23"),
        ('0 0 3 0 * *', "field day-of-month '0': 0 is out of range 1-31"),
        ('0 0 3 * FOO *', "field month 'FOO': 'FOO' is not a number or one of JAN"),
        ('0 0 3 * * 7', "field day-of-week '7': 7 is out of range 0-6"),
        ('0 0 ? * * *', "field hour '?': '?' is allowed only in day-of-month and day-of-week"),
        ('0 0 5-3 * * *', "field hour '5-3': range 5-3 runs backwards"),
        ('0 */0 3 * * *', "field minute '*/0': step '0' must be a positive integer"),
        ('0 0 3 * * 1-', "field day-of-week '1-': expected"),
    ],
)
def test_invalid_cron_is_refused_before_any_request(
    kfp_server, pipeline_file, capsys, cron, message
):
    args = _args(kfp_server, pipeline_file)
    args.cron = cron

    assert schedule_lib.run(args) == 2

    assert message in capsys.readouterr().out
    assert kfp_server.requests == []


@pytest.mark.parametrize(
    'cron',
    ['0 0 3 * * *', '0 0 3 ? * *', '*/30 0,15,30,45 0-6/2 1-31 JAN-DEC SUN,sat', '0 0 3 * * ?'],
)
def test_valid_cron_is_returned_unchanged(cron):
    assert schedule_lib.validate_cron(cron) == cron


def test_an_api_error_is_reported_with_the_servers_answer(kfp_server, pipeline_file, capsys):
    kfp_server.answers[('POST', '/apis/v2beta1/pipelines/upload')] = {'pipeline_id': 'pipe-1'}
    kfp_server.answers[('GET', '/apis/v2beta1/pipelines/pipe-1/versions')] = {
        'pipeline_versions': [{'pipeline_version_id': 'ver-1'}]
    }
    kfp_server.answers[('POST', '/apis/v2beta1/recurringruns')] = {
        'code': 7,
        'message': 'service account asynctrain-pipeline not allowed',
    }

    assert schedule_lib.run(_args(kfp_server, pipeline_file)) == 1

    out = capsys.readouterr().out
    assert 'the KFP API at http://127.0.0.1:' in out
    assert '403' in out and 'service account asynctrain-pipeline not allowed' in out


def test_a_spec_the_open_source_backend_refuses_is_not_uploaded(kfp_server, tmp_path, capsys):
    old = tmp_path / 'old.yaml'
    old.write_text(PIPELINE_YAML.replace('schemaVersion: 2.1.0', 'schemaVersion: 2.0.0'))

    assert schedule_lib.run(_args(kfp_server, old)) == 2

    printed = capsys.readouterr().out
    assert 'KFP only supports schema version 2.1.0, but the pipeline spec has version 2.0.0' in (
        printed
    )
    assert kfp_server.requests == []
