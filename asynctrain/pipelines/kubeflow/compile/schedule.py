"""`asynctrain schedule`: retrain daily by creating a Kubeflow Pipelines recurring run.

Uploads the compiled pipeline (`asynctrain compile --target kubeflow`) as a new version of the
named pipeline, creates the experiment if needed, and creates a recurring run of that version
with kfp's own client: a 6-field cron schedule (KFP's scheduler reads seconds first), at most one
run at a time (a day's run that overruns is never overlapped by the next), and no catch-up
(a paused schedule resumes with the latest day only; the rolling input range covers the gap).

    asynctrain schedule --host https://kfp.example --cron "0 0 3 * * *" --pipeline pipeline.yaml
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import re

import kfp
import kfp_server_api
import yaml

from asynctrain.pipelines.kubeflow.compile import kfp_rules

# KFP's ScheduledWorkflow controller parses schedules with robfig/cron: seconds come first.
_CRON_FIELDS = (
    ('second', 0, 59, {}),
    ('minute', 0, 59, {}),
    ('hour', 0, 23, {}),
    ('day-of-month', 1, 31, {}),
    (
        'month',
        1,
        12,
        {m: i + 1 for i, m in enumerate('JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC'.split())},
    ),
    ('day-of-week', 0, 6, {d: i for i, d in enumerate('SUN MON TUE WED THU FRI SAT'.split())}),
)
_QUESTION_MARK_FIELDS = ('day-of-month', 'day-of-week')
_RANGE = re.compile(r'^(?P<start>[^-/]+)(?:-(?P<end>[^-/]+))?(?:/(?P<step>[^-/]+))?$')


def _cron_value(text: str, low: int, high: int, names: dict[str, int], fail) -> int:
    if text.upper() in names:
        return names[text.upper()]
    if not text.isdigit():
        raise fail(
            f'{text!r} is not a number' + (f' or one of {", ".join(names)}' if names else '')
        )
    if not low <= int(text) <= high:
        raise fail(f'{int(text)} is out of range {low}-{high}')
    return int(text)


def validate_cron(expression: str) -> str:
    """Checks a 6-field cron expression; raises ValueError naming the field that is wrong."""
    fields = expression.split()
    if len(fields) != len(_CRON_FIELDS):
        raise ValueError(
            f'--cron needs 6 space-separated fields (second minute hour day-of-month month '
            f'day-of-week), e.g. "0 0 3 * * *" for 03:00 daily; got {len(fields)} in {expression!r}'
        )
    for text, (name, low, high, names) in zip(fields, _CRON_FIELDS, strict=True):

        def fail(why: str, text: str = text, name: str = name) -> ValueError:
            return ValueError(f'--cron field {name} {text!r}: {why}')

        for part in text.split(','):
            if part == '?':
                if name not in _QUESTION_MARK_FIELDS:
                    raise fail(f"'?' is allowed only in {' and '.join(_QUESTION_MARK_FIELDS)}")
                continue
            match = _RANGE.match(part)
            if not match:
                raise fail('expected *, a value, a range a-b, or either with /step')
            start, end, step = match['start'], match['end'], match['step']
            if start == '*':
                if end is not None:
                    raise fail("'*' cannot start a range")
            else:
                first = _cron_value(start, low, high, names, fail)
                if end is not None and _cron_value(end, low, high, names, fail) < first:
                    raise fail(f'range {start}-{end} runs backwards')
            if step is not None and not (step.isdigit() and int(step) > 0):
                raise fail(f'step {step!r} must be a positive integer')
    return expression


@dataclasses.dataclass(frozen=True)
class RecurringRun:
    """What `schedule` created on the KFP server.

    Attributes:
      recurring_run_id: ID of the recurring run.
      pipeline_id: ID of the pipeline the compiled file was uploaded to.
      pipeline_version_id: ID of the uploaded version the recurring run starts.
      experiment_id: ID of the experiment the runs belong to.
    """

    recurring_run_id: str
    pipeline_id: str
    pipeline_version_id: str
    experiment_id: str


def load_checked_pipeline(pipeline_file: str) -> dict:
    """The compiled pipeline in `pipeline_file`; kfp_rules.PipelineRefused when the open-source
    backend would refuse it (an older compile's schema 2.0.0, a resolver task)."""
    with open(pipeline_file) as f:
        document = yaml.safe_load(f)
    kfp_rules.check(document)
    return document


def schedule(
    client: kfp.Client,
    *,
    pipeline_file: str,
    cron: str,
    pipeline_name: str | None = None,
    experiment: str = 'asynctrain',
    job_name: str | None = None,
    namespace: str | None = None,
    service_account: str | None = None,
    version_name: str | None = None,
) -> RecurringRun:
    """Uploads `pipeline_file` and creates a recurring run of it on `client`'s KFP server.

    Raises:
      ValueError: a wrong cron field, named.
      kfp_rules.PipelineRefused: the open-source backend would refuse the pipeline (nothing is
        sent).
    """
    validate_cron(cron)
    document = load_checked_pipeline(pipeline_file)
    if pipeline_name is None:
        pipeline_name = document['pipelineInfo']['name']
    version_name = (
        version_name
        or f'{pipeline_name}-{datetime.datetime.now(datetime.timezone.utc):%Y%m%d-%H%M%S}'
    )

    pipeline_id = client.get_pipeline_id(pipeline_name)
    if pipeline_id is None:
        # A new pipeline gets the uploaded file as its first and only version.
        pipeline_id = client.upload_pipeline(
            pipeline_file, pipeline_name=pipeline_name, namespace=namespace
        ).pipeline_id
        versions = client.list_pipeline_versions(
            pipeline_id, sort_by='created_at desc', page_size=1
        ).pipeline_versions
        version_id = versions[0].pipeline_version_id
    else:
        version_id = client.upload_pipeline_version(
            pipeline_file, pipeline_version_name=version_name, pipeline_id=pipeline_id
        ).pipeline_version_id
    experiment_id = client.create_experiment(experiment, namespace=namespace).experiment_id
    recurring_run = client.create_recurring_run(
        experiment_id=experiment_id,
        job_name=job_name or f'{pipeline_name}-daily',
        cron_expression=cron,
        max_concurrency=1,
        no_catchup=True,
        pipeline_id=pipeline_id,
        version_id=version_id,
        service_account=service_account,
    )
    return RecurringRun(recurring_run.recurring_run_id, pipeline_id, version_id, experiment_id)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        '--host',
        required=True,
        help='KFP API endpoint, e.g. https://kfp.example or http://localhost:8080',
    )
    parser.add_argument(
        '--cron',
        required=True,
        help='6-field cron, seconds first: "0 0 3 * * *" is 03:00 daily (cluster time zone)',
    )
    parser.add_argument(
        '--pipeline',
        default='pipeline.yaml',
        help='compiled pipeline (asynctrain compile --target kubeflow)',
    )
    parser.add_argument(
        '--pipeline-name',
        help="pipeline name on the server (default: the file's pipelineInfo.name)",
    )
    parser.add_argument('--experiment', default='asynctrain', help='experiment the runs belong to')
    parser.add_argument('--job-name', help='recurring run name (default: <pipeline name>-daily)')
    parser.add_argument('--namespace', help='Kubeflow profile namespace (multi-user deployments)')
    parser.add_argument(
        '--service-account',
        help='service account of the pipeline pods, e.g. asynctrain-pipeline (kubeflow/rbac.yaml)',
    )
    parser.add_argument(
        '--existing-token', help='bearer token for the KFP API, when the endpoint needs one'
    )


def run(args: argparse.Namespace) -> int:
    try:
        validate_cron(args.cron)
        # Before the client: kfp.Client's constructor already calls the server.
        load_checked_pipeline(args.pipeline)
    except kfp_rules.PipelineRefused as error:
        print(f'asynctrain schedule: {args.pipeline}: {error}')
        return 2
    except ValueError as error:
        print(f'asynctrain schedule: {error}')
        return 2
    client = kfp.Client(
        host=args.host, namespace=args.namespace or 'kubeflow', existing_token=args.existing_token
    )
    try:
        created = schedule(
            client,
            pipeline_file=args.pipeline,
            cron=args.cron,
            pipeline_name=args.pipeline_name,
            experiment=args.experiment,
            job_name=args.job_name,
            namespace=args.namespace,
            service_account=args.service_account,
        )
    except kfp_server_api.ApiException as error:
        print(
            f'asynctrain schedule: the KFP API at {args.host} answered {error.status} {error.reason}: {error.body}'
        )
        return 1
    print(
        f'recurring run {created.recurring_run_id}: pipeline {created.pipeline_id} version '
        f'{created.pipeline_version_id}, experiment {created.experiment_id}, cron {args.cron!r}, '
        'max concurrency 1, no catch-up'
    )
    return 0
