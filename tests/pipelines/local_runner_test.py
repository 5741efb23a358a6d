"""The local runner's guard: one run at a time per pipeline of a work directory, refused clearly."""

import subprocess
import sys

import pytest

from asynctrain.pipelines.config import load_config
from asynctrain.pipelines.local_runner import run_local
from asynctrain.pipelines.work_dir_lock import WorkDirBusyError, exclusive_work_dir

HOLD_LOCK = """
import sys, time
from asynctrain.pipelines.work_dir_lock import exclusive_work_dir
with exclusive_work_dir(sys.argv[1]):
    print('locked', flush=True)
    time.sleep(60)
"""


def test_a_second_run_on_a_busy_work_dir_fails_naming_the_holder(tmp_path):
    # The lock is the pipeline's folder of the work dir (`work_dir_layout`).
    config = load_config(work_dir=str(tmp_path))
    state = tmp_path / config.pipeline_name
    assert config.state_dir == str(state)
    holder = subprocess.Popen(
        [sys.executable, '-c', HOLD_LOCK, str(state)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == 'locked'
        before = sorted(p.name for p in state.iterdir())
        with pytest.raises(WorkDirBusyError, match=rf'pid {holder.pid}\) is using {state}'):
            run_local(config)
        # Refused before building or running anything: the work dir is as the holder left it.
        assert sorted(p.name for p in state.iterdir()) == before
        assert not (state / 'metadata.sqlite').exists()
        assert not (tmp_path / 'metadata.sqlite').exists()
    finally:
        holder.kill()
        holder.wait()
    # Once the holder is gone (even killed), the lock is free again.
    with exclusive_work_dir(str(state)):
        pass


def test_the_lock_is_exclusive_within_one_process_too(tmp_path):
    with exclusive_work_dir(str(tmp_path)):
        with pytest.raises(WorkDirBusyError):
            with exclusive_work_dir(str(tmp_path)):
                pass


def test_the_beam_components_are_the_ones_whose_elapsed_time_shows(tmp_path):
    from asynctrain.pipelines import dataset
    from asynctrain.pipelines.local_runner import beam_component_ids
    from asynctrain.pipelines.pipeline import create_pipeline

    config = load_config(None, work_dir=str(tmp_path))
    pipeline = create_pipeline(config, dataset.load(config))
    assert beam_component_ids(pipeline) == [
        'CsvExampleGen',
        'Transform',
        'ExampleBatcher',
        'Evaluator',
    ]


def test_a_run_in_a_work_dir_of_the_shared_layout_says_so_and_uses_its_paths(tmp_path, capsys):
    """A work dir of asynctrain 0.1 (metadata.sqlite at its top): the run prints the notice with
    the command that moves it aside, and uses the work dir itself as the pipeline's folder (here
    its lock, held, refuses the run before anything is written)."""
    import argparse

    from asynctrain.cli import run_command

    (tmp_path / 'metadata.sqlite').write_bytes(b'')
    args = argparse.Namespace(
        config=None, data=None, work_dir=str(tmp_path), date=None, accept_drift=None
    )
    with exclusive_work_dir(str(tmp_path)):
        code = run_command.run(args)
    printed = capsys.readouterr()

    assert code == 3
    assert printed.out.splitlines()[1:3] == [
        f'            state {tmp_path}',
        f'note: {tmp_path} has the layout of asynctrain 0.1 (one metadata.sqlite, pipeline_root '
        'and serving_model for every pipeline); it is used as it is, and each pipeline takes only '
        f'the models it pushed itself. For a folder per pipeline, move it aside (mv {tmp_path} '
        f'{tmp_path}.shared): the next run starts afresh in {tmp_path}/<pipeline_name>.',
    ]
    assert f'is using {tmp_path};' in printed.err
    assert not (tmp_path / 'asynctrain-taxi').exists()
