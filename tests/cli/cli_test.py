"""The command line as a front door: importing it changes nothing, and every registered command
and bench loads a module that can add its arguments and run."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest

from asynctrain import cli
from asynctrain.cli import commands


def test_importing_the_command_line_sets_no_environment_and_loads_no_tensorflow():
    # In a fresh interpreter with none of the variables `main` would set: what the import alone does.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ('TF_USE_LEGACY_KERAS', 'GRPC_FAIL_FAST', 'TF_CPP_MIN_LOG_LEVEL')
    }
    probe = (
        'import json, os, sys\n'
        'before = dict(os.environ)\n'
        'import asynctrain.cli\n'
        'print(json.dumps({"changed": sorted(set(os.environ.items()) ^ set(before.items())),'
        ' "heavy": sorted(m for m in ("tensorflow", "tfx", "apache_beam") if m in sys.modules)}))\n'
    )
    out = subprocess.run(
        [sys.executable, '-c', probe], env=env, capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == {'changed': [], 'heavy': []}


@pytest.mark.parametrize(
    'table, name',
    [('commands', n) for n in commands.COMMANDS] + [('bench', n) for n in commands.BENCHMARKS],
)
def test_every_entry_loads_a_module_that_adds_arguments_and_runs(table, name):
    entry = (commands.COMMANDS if table == 'commands' else commands.BENCHMARKS)[name]
    module = entry.load()
    assert callable(module.run)
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    assert len(parser._actions) > 1  # noqa: SLF001  (beyond -h, the command's own options)


def test_the_parser_routes_a_bench_to_its_loader():
    argv = ['bench', 'transform', '--help']
    parser = cli.build_parser(argv)
    args = parser.parse_args(['bench', 'transform'])
    assert args._load is commands.BENCHMARKS['transform'].load  # noqa: SLF001
    assert args._load().__name__ == 'asynctrain.benchmarks.transform'  # noqa: SLF001
