"""Two datasets run one after the other from one folder, each with the command `asynctrain init`
printed for it: each pipeline keeps its state under its own name, so both are pushed and
neither is judged against, or compared with, the other's model.

The user report this answers: penguins then diabetes from one folder, both into `./runs/local`;
the second run stopped at DriftValidator against the first dataset's model, and with
`--accept-drift` its Evaluator took the first dataset's model as its baseline and failed on
its label. Here the second run is a first run of its own pipeline: DriftValidator has nothing to
compare with, LatestBlessedModel hands on the empty model and passes over nothing, and the
Evaluator blesses on the absolute bound.
"""

from __future__ import annotations

import json
import os
import shlex

import pytest

from asynctrain import cli
from asynctrain.components.latest_blessed_model import spec as latest_spec
from asynctrain.components.shared import model_identity
from asynctrain.pipelines import run_summary
from asynctrain.pipelines.config import load_config
from tests.e2e.e2e_helpers import DATASETS, components_for, run_cli

pytestmark = pytest.mark.e2e

# The pipeline names init gives: the CSV's name without its suffix, then the label.
NAMES = {'penguins': 'penguins-raw-species', 'diabetes': 'diabetes-disease-progression'}


def _init(name: str, capsys) -> list[str]:
    """init on the committed dataset, into `<name>-spec` of the current folder; the run command
    it printed, as arguments."""
    dataset = DATASETS[name]
    code = cli.main(
        ['init', '--data', str(dataset.directory / 'data'), '--label', dataset.label]
        + ['--output', f'{name}-spec']
    )
    printed = capsys.readouterr()
    assert code == 0, printed.err[-4000:]
    command = shlex.split(printed.out.splitlines()[-1])
    assert command[:2] == ['asynctrain', 'run'], printed.out[-2000:]
    return command[2:]


def _latest_blessed_model(config):
    """The Model artifact the run's LatestBlessedModel wrote, from the pipeline's metadata."""
    from tfx.orchestration import metadata

    connection = metadata.sqlite_metadata_connection_config(config.metadata_path)
    with metadata.Metadata(connection) as m:
        return run_summary._latest(
            m.store, 'Model', run_summary.LATEST_BLESSED_MODEL, config.pipeline_name
        )


def test_two_datasets_from_one_folder_keep_their_state_apart(tmp_path, monkeypatch, capsys):
    folder = tmp_path / 'home'
    folder.mkdir()
    monkeypatch.chdir(folder)
    work_dir = folder / 'runs' / 'local'
    configs = {}
    for name in ('penguins', 'diabetes'):
        args = _init(name, capsys)
        # As a daily pipeline would: warm start on, beside init's `baseline: latest_blessed` and
        # drift check, so that each of the three readers of the latest blessed model is asked.
        with open(folder / f'{name}-spec' / 'config.yaml', 'a') as f:
            f.write('retraining: {warm_start: true}\n')
        assert args == [
            '--config',
            str(folder / f'{name}-spec' / 'config.yaml'),
            '--work-dir',
            str(work_dir),
        ]
        # From another folder than init's: the command's paths are absolute.
        run = run_cli('run', *args, cwd=tmp_path)
        output = f'stdout:\n{run.stdout[-4000:]}\nstderr:\n{run.stderr[-4000:]}'
        assert run.returncode == 0, output
        state = work_dir / NAMES[name]
        assert f'            state {state}\n' in run.stdout, output
        config = load_config(args[1], work_dir=args[3])
        assert config.retraining.warm_start and config.evaluation.baseline == 'latest_blessed'
        configs[name] = config
        assert config.pipeline_name == NAMES[name]
        assert config.state_dir == str(state)

        summary = run_summary.read_summary(config, started=0.0)
        assert summary.executed == components_for(config)
        assert summary.blessed is True, output
        assert summary.pushed_model.startswith(str(state / 'serving_model') + '/')
        # A first run of its pipeline, the other's model there or not: nothing to compare with,
        # nothing passed over, no model to warm-start from or to beat.
        assert summary.drift['first_run'] is True, summary.drift
        assert summary.passed_over == []
        assert summary.base_model is None
        latest = _latest_blessed_model(config)
        assert latest.custom_properties[latest_spec.PUSHED_MODEL_PROPERTY].string_value == ''
        assert (
            json.loads(latest.custom_properties[latest_spec.PASSED_OVER_PROPERTY].string_value)
            == []
        )
        # The push carries the pipeline's identity.
        with open(os.path.join(summary.pushed_model, model_identity.MODEL_IDENTITY_PATH)) as f:
            identity = model_identity.ModelIdentity.from_json(f.read())
        assert (identity.pipeline_name, identity.label) == (NAMES[name], DATASETS[name].label)
        assert identity.schema_fingerprint == model_identity.schema_file_fingerprint(
            config.schema_path
        )

    # Each pipeline's folder holds its own metadata, artifacts, pushes and logs; nothing at the
    # work dir's top, and each push destination holds one push, its own.
    assert sorted(os.listdir(work_dir)) == sorted(NAMES.values())
    for name, config in configs.items():
        assert sorted(os.listdir(config.state_dir)) == [
            '.run.lock',
            'logs',
            'metadata.sqlite',
            'pipeline_root',
            'serving_model',
        ]
        assert len(os.listdir(config.serving_dir)) == 1, name
