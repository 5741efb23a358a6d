"""`tools/import_graph.py`: the repository has no import cycle, keeps its layers (components below
pipelines, the trainer's one direction) and no oversized module; on a synthetic package it
reports exactly the planted faults."""

import importlib.util
import pathlib
import sys
import textwrap

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
TOOL = REPO / 'tools' / 'import_graph.py'


@pytest.fixture(scope='module')
def graph():
    spec = importlib.util.spec_from_file_location('import_graph', TOOL)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def _write(root: pathlib.Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text))


def test_the_repository_has_no_cycle_no_direction_violation_and_no_oversized_module(graph):
    report = graph.check(str(REPO))

    assert report.module_level_cycles == []
    assert report.cycles == []  # function-level imports included
    assert report.direction_violations == []
    assert report.oversized == []  # components/ and pipelines/: at most 450 lines each


def test_reports_exactly_the_planted_cycles_violations_and_long_modules(graph, tmp_path, capsys):
    _write(
        tmp_path,
        {
            'components/__init__.py': '',
            'components/trainer/__init__.py': '',
            'components/trainer/training/__init__.py': '',
            # A module-level cycle through a relative import.
            'components/trainer/training/loop.py': 'from . import run_files\n',
            'components/trainer/training/run_files.py': 'import components.trainer.training.loop\n',
            # A lazy import from training/ back to cluster/: a direction violation, and a cycle
            # only through a function-level import.
            'components/trainer/training/export.py': """\
                import os

                def export():
                    from components.trainer.cluster import servers
                    return servers, os
            """,
            'components/trainer/cluster/__init__.py': '',
            'components/trainer/cluster/servers.py': (
                'from components.trainer.training.export import export\n'
            ),
            # The allowed direction (kubernetes -> cluster); a type-only import never runs, but
            # reaching up into the pipeline layer is a violation even there.
            'components/trainer/kubernetes/__init__.py': '',
            'components/trainer/kubernetes/tfjob.py': """\
                from typing import TYPE_CHECKING

                from components.trainer.cluster import servers

                if TYPE_CHECKING:
                    from pipelines import config
            """,
            'pipelines/__init__.py': '',
            'pipelines/config.py': 'import components.trainer.kubernetes.tfjob\n' + 'x = 1\n' * 451,
            'pipelines/short.py': 'y = 1\n' * 401,
            'benchmarks/__init__.py': '',
            'benchmarks/long.py': 'z = 1\n' * 500,
        },
    )

    report = graph.check(str(tmp_path))

    loop, run_files = 'components.trainer.training.loop', 'components.trainer.training.run_files'
    export, servers = 'components.trainer.training.export', 'components.trainer.cluster.servers'
    tfjob, config = 'components.trainer.kubernetes.tfjob', 'pipelines.config'
    assert report.module_level_cycles == [[loop, run_files]]
    # Through every import: the lazy one closes export <-> servers, the type-only one
    # config <-> tfjob.
    assert report.cycles == [[servers, export], [tfjob, config], [loop, run_files]]
    assert report.direction_violations == [
        'components/trainer/kubernetes/tfjob.py:6: components.trainer.kubernetes.tfjob imports '
        'pipelines.config (components must not import pipelines)',
        'components/trainer/training/export.py:4: components.trainer.training.export imports '
        'components.trainer.cluster.servers '
        '(components.trainer.training must not import components.trainer.cluster)',
    ]
    assert report.oversized == [('pipelines/config.py', 452)]  # benchmarks/ are not size-checked
    assert report.long_modules == [
        ('benchmarks/long.py', 500),
        ('pipelines/config.py', 452),
        ('pipelines/short.py', 401),
    ]
    assert not report.ok

    assert graph.main(['--root', str(tmp_path)]) == 1
    printed = capsys.readouterr().out
    assert f'cycle (module-level imports): {loop} <-> {run_files}' in printed
    assert f'cycle (through function-level imports): {servers} <-> {export}' in printed
    assert f'cycle (through function-level imports): {tfjob} <-> {config}' in printed
    assert 'direction: components/trainer/training/export.py:4:' in printed
    assert 'size: pipelines/config.py: 452 lines (limit 450)' in printed
    assert printed.rstrip().endswith('import graph: FAILED')


def test_a_clean_package_passes(graph, tmp_path, capsys):
    _write(
        tmp_path,
        {
            'components/__init__.py': '',
            'components/trainer/__init__.py': '',
            'components/trainer/training/loop.py': 'import os\n',
            'components/trainer/cluster/servers.py': (
                'from components.trainer.training import loop\n'
            ),
            'pipelines/__init__.py': '',
            'pipelines/run.py': 'from components.trainer.cluster import servers\n',
        },
    )

    assert graph.main(['--root', str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == 'import graph: ok'


def test_a_component_importing_the_pipeline_layer_or_a_benchmark_is_reported(graph, tmp_path):
    _write(
        tmp_path,
        {
            'components/__init__.py': '',
            'components/console.py': 'import os\n',
            'components/trainer/__init__.py': '',
            # What the trainer's CLI once did: the console from the pipeline layer.
            'components/trainer/cli.py': 'from pipelines import console\n',
            'components/trainer/executor.py': """\
                def run():
                    from benchmarks import report
                    return report
            """,
            'pipelines/__init__.py': '',
            'pipelines/console.py': 'from components.console import *\n',
            # The layers' allowed direction: pipelines and benchmarks import components.
            'pipelines/run.py': 'from components import console\n',
            'benchmarks/__init__.py': '',
            'benchmarks/report.py': 'from components.trainer import cli\n',
        },
    )

    report = graph.check(str(tmp_path))

    assert report.direction_violations == [
        'components/trainer/cli.py:1: components.trainer.cli imports pipelines.console '
        '(components must not import pipelines)',
        'components/trainer/executor.py:2: components.trainer.executor imports benchmarks.report '
        '(components must not import benchmarks)',
    ]
    assert not report.ok
