"""`tools/import_graph.py`: the repository has no import cycle, keeps its layers (components below
pipelines, the test kit above both and below the benches, the trainer's one direction, the Kubeflow
rooms' one direction, one component reaching another only through the shared home) and no
oversized module; on a synthetic package it reports exactly the planted faults."""

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
    assert report.oversized == []  # components and pipelines: at most 450 lines each


def test_reports_exactly_the_planted_cycles_violations_and_long_modules(graph, tmp_path, capsys):
    _write(
        tmp_path,
        {
            'asynctrain/components/__init__.py': '',
            'asynctrain/components/trainer/__init__.py': '',
            'asynctrain/components/trainer/training/__init__.py': '',
            # A module-level cycle through a relative import.
            'asynctrain/components/trainer/training/loop.py': 'from . import run_files\n',
            'asynctrain/components/trainer/training/run_files.py': 'import asynctrain.components.trainer.training.loop\n',
            # A lazy import from training/ back to cluster/: a direction violation, and a cycle
            # only through a function-level import.
            'asynctrain/components/trainer/training/export.py': """\
                import os

                def export():
                    from asynctrain.components.trainer.cluster import servers
                    return servers, os
            """,
            'asynctrain/components/trainer/cluster/__init__.py': '',
            'asynctrain/components/trainer/cluster/servers.py': (
                'from asynctrain.components.trainer.training.export import export\n'
            ),
            # The allowed direction (kubernetes -> cluster); a type-only import never runs, but
            # reaching up into the pipeline layer is a violation even there.
            'asynctrain/components/trainer/kubernetes/__init__.py': '',
            'asynctrain/components/trainer/kubernetes/tfjob.py': """\
                from typing import TYPE_CHECKING

                from asynctrain.components.trainer.cluster import servers

                if TYPE_CHECKING:
                    from asynctrain.pipelines import config
            """,
            'asynctrain/pipelines/__init__.py': '',
            'asynctrain/pipelines/config.py': 'import asynctrain.components.trainer.kubernetes.tfjob\n'
            + 'x = 1\n' * 451,
            'asynctrain/pipelines/short.py': 'y = 1\n' * 401,
            'asynctrain/benchmarks/__init__.py': '',
            'asynctrain/benchmarks/long.py': 'z = 1\n' * 500,
        },
    )

    report = graph.check(str(tmp_path))

    loop, run_files = (
        'asynctrain.components.trainer.training.loop',
        'asynctrain.components.trainer.training.run_files',
    )
    export, servers = (
        'asynctrain.components.trainer.training.export',
        'asynctrain.components.trainer.cluster.servers',
    )
    tfjob, config = 'asynctrain.components.trainer.kubernetes.tfjob', 'asynctrain.pipelines.config'
    assert report.module_level_cycles == [[loop, run_files]]
    # Through every import: the lazy one closes export <-> servers, the type-only one
    # config <-> tfjob.
    assert report.cycles == [[servers, export], [tfjob, config], [loop, run_files]]
    assert report.direction_violations == [
        'asynctrain/components/trainer/kubernetes/tfjob.py:6: asynctrain.components.trainer.kubernetes.tfjob imports '
        'asynctrain.pipelines.config (asynctrain.components must not import asynctrain.pipelines)',
        'asynctrain/components/trainer/training/export.py:4: asynctrain.components.trainer.training.export imports '
        'asynctrain.components.trainer.cluster.servers '
        '(asynctrain.components.trainer.training must not import asynctrain.components.trainer.cluster)',
    ]
    assert report.oversized == [
        ('asynctrain/pipelines/config.py', 452)
    ]  # asynctrain/benchmarks/ are not size-checked
    assert report.long_modules == [
        ('asynctrain/benchmarks/long.py', 500),
        ('asynctrain/pipelines/config.py', 452),
        ('asynctrain/pipelines/short.py', 401),
    ]
    assert not report.ok

    assert graph.main(['--root', str(tmp_path)]) == 1
    printed = capsys.readouterr().out
    assert f'cycle (module-level imports): {loop} <-> {run_files}' in printed
    assert f'cycle (through function-level imports): {servers} <-> {export}' in printed
    assert f'cycle (through function-level imports): {tfjob} <-> {config}' in printed
    assert 'direction: asynctrain/components/trainer/training/export.py:4:' in printed
    assert 'size: asynctrain/pipelines/config.py: 452 lines (limit 450)' in printed
    assert printed.rstrip().endswith('import graph: FAILED')


def test_a_clean_package_passes(graph, tmp_path, capsys):
    _write(
        tmp_path,
        {
            'asynctrain/components/__init__.py': '',
            'asynctrain/components/trainer/__init__.py': '',
            'asynctrain/components/trainer/training/loop.py': 'import os\n',
            'asynctrain/components/trainer/cluster/servers.py': (
                'from asynctrain.components.trainer.training import loop\n'
            ),
            'asynctrain/pipelines/__init__.py': '',
            'asynctrain/pipelines/run.py': 'from asynctrain.components.trainer.cluster import servers\n',
        },
    )

    assert graph.main(['--root', str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == 'import graph: ok'


def test_a_component_importing_the_pipeline_layer_or_a_benchmark_is_reported(graph, tmp_path):
    _write(
        tmp_path,
        {
            'asynctrain/components/__init__.py': '',
            'asynctrain/components/shared/console.py': 'import os\n',
            'asynctrain/components/trainer/__init__.py': '',
            # What the trainer's CLI once did: the console from the pipeline layer.
            'asynctrain/components/trainer/cli.py': 'from asynctrain.pipelines import console\n',
            'asynctrain/components/trainer/executor.py': """\
                def run():
                    from asynctrain.benchmarks import report
                    return report
            """,
            'asynctrain/pipelines/__init__.py': '',
            'asynctrain/pipelines/console.py': 'from asynctrain.components.shared.console import *\n',
            # The layers' allowed direction: pipelines and benchmarks import asynctrain.components.
            'asynctrain/pipelines/run.py': 'from asynctrain.components.shared import console\n',
            'asynctrain/benchmarks/__init__.py': '',
            'asynctrain/benchmarks/report.py': 'from asynctrain.components.trainer import cli\n',
        },
    )

    report = graph.check(str(tmp_path))

    assert report.direction_violations == [
        'asynctrain/components/trainer/cli.py:1: asynctrain.components.trainer.cli imports asynctrain.pipelines.console '
        '(asynctrain.components must not import asynctrain.pipelines)',
        'asynctrain/components/trainer/executor.py:2: asynctrain.components.trainer.executor imports asynctrain.benchmarks.report '
        '(asynctrain.components must not import asynctrain.benchmarks)',
    ]
    assert not report.ok


def test_the_test_kit_is_imported_by_benches_and_tests_only_and_imports_no_bench(graph, tmp_path):
    _write(
        tmp_path,
        {
            'asynctrain/components/__init__.py': '',
            'asynctrain/components/example_gen/executor.py': 'import os\n',
            # A run reaching for test scaffolding, at module level and inside a function.
            'asynctrain/components/example_gen/cli.py': 'from asynctrain.testing import taxi_data\n',
            'asynctrain/pipelines/__init__.py': '',
            'asynctrain/pipelines/run.py': """\
                def run():
                    from asynctrain.testing.spark import cluster
                    return cluster
            """,
            'asynctrain/testing/__init__.py': '',
            'asynctrain/testing/taxi_data.py': 'import os\n',
            'asynctrain/testing/spark/__init__.py': '',
            # The kit may import the components; not a bench.
            'asynctrain/testing/spark/cluster.py': (
                'from asynctrain.components.example_gen import executor\n'
                'from asynctrain.benchmarks import report\n'
            ),
            # The allowed direction: a bench imports the kit.
            'asynctrain/benchmarks/__init__.py': '',
            'asynctrain/benchmarks/report.py': 'import os\n',
            'asynctrain/benchmarks/examplegen.py': 'from asynctrain.testing import taxi_data\n',
        },
    )

    report = graph.check(str(tmp_path))

    assert report.direction_violations == [
        'asynctrain/components/example_gen/cli.py:1: asynctrain.components.example_gen.cli imports '
        'asynctrain.testing.taxi_data (asynctrain.components must not import asynctrain.testing)',
        'asynctrain/pipelines/run.py:2: asynctrain.pipelines.run imports '
        'asynctrain.testing.spark.cluster (asynctrain.pipelines must not import asynctrain.testing)',
        'asynctrain/testing/spark/cluster.py:2: asynctrain.testing.spark.cluster imports '
        'asynctrain.benchmarks.report (asynctrain.testing must not import asynctrain.benchmarks)',
    ]
    assert not report.ok


def test_a_component_importing_another_except_through_the_shared_home_is_reported(graph, tmp_path):
    _write(
        tmp_path,
        {
            'asynctrain/__init__.py': '',
            'asynctrain/components/__init__.py': '',
            'asynctrain/components/shared/__init__.py': '',
            'asynctrain/components/shared/columnar_records.py': 'import os\n',
            # The shared home reaching up into a component.
            'asynctrain/components/shared/tasks.py': (
                'from asynctrain.components.trainer import config\n'
            ),
            'asynctrain/components/example_batcher/__init__.py': '',
            'asynctrain/components/example_batcher/records.py': 'import os\n',
            'asynctrain/components/example_batcher/executor.py': (
                'from asynctrain.components.shared import columnar_records\n'
                'from asynctrain.components.example_batcher import records\n'
            ),
            'asynctrain/components/trainer/__init__.py': '',
            'asynctrain/components/trainer/config.py': 'import os\n',
            # What the Trainer once did: the record format from the ExampleBatcher's folder; the
            # same format through the shared home is the allowed way.
            'asynctrain/components/trainer/training/__init__.py': '',
            'asynctrain/components/trainer/training/data.py': """\
                from asynctrain.components.shared import columnar_records

                def read():
                    from asynctrain.components.example_batcher import records
                    return records, columnar_records
            """,
            # The pipeline layer may import any component.
            'asynctrain/pipelines/__init__.py': '',
            'asynctrain/pipelines/pipeline.py': (
                'from asynctrain.components.example_batcher import executor\n'
                'from asynctrain.components.trainer import config\n'
            ),
        },
    )

    report = graph.check(str(tmp_path))

    assert report.direction_violations == [
        'asynctrain/components/shared/tasks.py:1: asynctrain.components.shared.tasks imports '
        'asynctrain.components.trainer.config '
        '(a component imports another only through asynctrain.components.shared)',
        'asynctrain/components/trainer/training/data.py:4: '
        'asynctrain.components.trainer.training.data imports '
        'asynctrain.components.example_batcher.records '
        '(a component imports another only through asynctrain.components.shared)',
    ]
    assert not report.ok


def test_the_kubeflow_rooms_import_one_way_local_backend_compile_container(graph, tmp_path):
    kubeflow = 'asynctrain/pipelines/kubeflow'
    _write(
        tmp_path,
        {
            'asynctrain/pipelines/__init__.py': '',
            f'{kubeflow}/__init__.py': '',
            f'{kubeflow}/container/__init__.py': '',
            f'{kubeflow}/container/kfp_storage.py': 'import os\n',
            # The step's container reaching for the compiler, and for the emulator in a function.
            f'{kubeflow}/container/kfp_entrypoint.py': """\
                from asynctrain.pipelines.kubeflow.compile import kfp_rules

                def run():
                    from asynctrain.pipelines.kubeflow.local_backend import kfp_cache
                    return kfp_cache
            """,
            f'{kubeflow}/compile/__init__.py': '',
            f'{kubeflow}/compile/kfp_rules.py': 'import os\n',
            # The compiler reaching for the emulator; the container room below it is allowed.
            f'{kubeflow}/compile/kubeflow_runner.py': (
                'from asynctrain.pipelines.kubeflow.container import kfp_storage\n'
                'from asynctrain.pipelines.kubeflow.local_backend import kfp_profiles\n'
            ),
            f'{kubeflow}/local_backend/__init__.py': '',
            f'{kubeflow}/local_backend/kfp_profiles.py': 'import os\n',
            f'{kubeflow}/local_backend/kfp_cache.py': 'import os\n',
            # The emulator may import both rooms below it.
            f'{kubeflow}/local_backend/compiled_run.py': (
                'from asynctrain.pipelines.kubeflow.compile import kfp_rules\n'
                'from asynctrain.pipelines.kubeflow.container import kfp_storage\n'
            ),
        },
    )

    report = graph.check(str(tmp_path))

    prefix = 'asynctrain.pipelines.kubeflow'
    assert report.direction_violations == [
        f'{kubeflow}/compile/kubeflow_runner.py:2: {prefix}.compile.kubeflow_runner imports '
        f'{prefix}.local_backend.kfp_profiles ({prefix}.compile must not import {prefix}.local_backend)',
        f'{kubeflow}/container/kfp_entrypoint.py:1: {prefix}.container.kfp_entrypoint imports '
        f'{prefix}.compile.kfp_rules ({prefix}.container must not import {prefix}.compile)',
        f'{kubeflow}/container/kfp_entrypoint.py:4: {prefix}.container.kfp_entrypoint imports '
        f'{prefix}.local_backend.kfp_cache ({prefix}.container must not import {prefix}.local_backend)',
    ]
    assert not report.ok
