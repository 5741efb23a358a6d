"""`asynctrain run` (asynctrain/cli/run_command.py): the configuration and the dataset are read
once, before TensorFlow, and the pipeline is wired over what was read."""

from __future__ import annotations

import argparse

from asynctrain.cli import run_command
from asynctrain.pipelines import dataset, local_runner


class _Summary:
    def format(self) -> str:
        return 'summary'


def test_the_dataset_is_loaded_once_and_handed_to_the_run(tmp_path, monkeypatch):
    loads = []
    real_load = dataset.load

    def counted_load(config):
        loads.append(config.pipeline_name)
        return real_load(config)

    handed = {}

    def run_local(config, log_path=None, verbose=False, loaded=None):
        handed.update(config=config, loaded=loaded, log_path=log_path)
        return _Summary()

    monkeypatch.setattr(dataset, 'load', counted_load)
    monkeypatch.setattr(local_runner, 'run_local', run_local)
    parser = argparse.ArgumentParser()
    run_command.add_arguments(parser)
    args = parser.parse_args(['--work-dir', str(tmp_path)])

    assert run_command.run(args) == 0

    assert loads == [handed['config'].pipeline_name]
    assert isinstance(handed['loaded'], dataset.Dataset)
    assert handed['loaded'].identity.pipeline_name == handed['config'].pipeline_name
    assert handed['log_path'].startswith(str(tmp_path))
