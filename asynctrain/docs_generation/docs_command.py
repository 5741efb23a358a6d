"""`asynctrain docs`: writes the generated parts of `docs/`, or checks that they are current.

    asynctrain docs            # rewrite docs/configuration.md, the tables of docs/benchmarks.md
                               # and the package tree of docs/architecture.md
    asynctrain docs --check    # exit 1 naming each page that differs from what would be written

The configuration reference comes from the config dataclasses (`config_reference`), the benchmark
tables from the committed `docs/*.json` (`benchmark_tables`), the package tree from the package's
folders and docstrings (`package_tree`); the prose around the tables and the tree is hand-written
and left as it is.
"""

from __future__ import annotations

import argparse
import os
import sys

from asynctrain.docs_generation import benchmark_tables, config_reference, package_tree

# A checkout's docs/, from the repository root where the command is run; the pages are not
# package data.
DOCS_DIR = 'docs'
CONFIGURATION = 'configuration.md'
BENCHMARKS = 'benchmarks.md'
ARCHITECTURE = 'architecture.md'


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        '--docs-dir', default=DOCS_DIR, help='the docs folder (default: %(default)s)'
    )
    parser.add_argument(
        '--check', action='store_true', help='write nothing; exit 1 if a generated page is stale'
    )


def generated_pages(docs_dir: str) -> dict[str, str]:
    """Each generated page's path and the text it should hold."""
    benchmarks = os.path.join(docs_dir, BENCHMARKS)
    architecture = os.path.join(docs_dir, ARCHITECTURE)
    with open(benchmarks, encoding='utf-8') as f:
        current = f.read()
    with open(architecture, encoding='utf-8') as f:
        architecture_page = f.read()
    return {
        os.path.join(docs_dir, CONFIGURATION): config_reference.render(),
        benchmarks: benchmark_tables.fill(current, docs_dir),
        architecture: package_tree.fill(architecture_page),
    }


def _read(path: str) -> str | None:
    try:
        with open(path, encoding='utf-8') as f:
            return f.read()
    except FileNotFoundError:
        return None


def run(args: argparse.Namespace) -> int:
    stale = []
    for path, text in generated_pages(args.docs_dir).items():
        if _read(path) == text:
            continue
        stale.append(path)
        if not args.check:
            with open(path, 'w', encoding='utf-8') as f:
                f.write(text)
            print(f'wrote {path}')
    if args.check and stale:
        for path in stale:
            print(f'{path} is not current: run `asynctrain docs`', file=sys.stderr)
        return 1
    if not stale:
        print('docs: generated pages are current')
    return 0
