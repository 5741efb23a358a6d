"""Checks the project's import graph and module sizes from the source alone (`ast`, no imports).

    python tools/import_graph.py                       # asynctrain/
    python tools/import_graph.py --root DIR PACKAGE...  # any tree of packages

Reports, and exits 1 on any of the first three:

- import cycles between project modules, twice: through module-level imports only (those run when
  a module is imported), and through every import, function-level ones included (a lazy import
  hides a cycle from Python but not from the design);
- imports against the layers: `asynctrain.components` never imports `asynctrain.pipelines` or
  `asynctrain.benchmarks` (code both share, like the console, lives in the components' shared
  home), neither components nor pipelines import `asynctrain.docs_generation` (nothing a run
  does needs it) or the test kit `asynctrain.testing` (a run never needs a test's scaffolding),
  the test kit never imports `asynctrain.benchmarks` (benches import the kit, not the reverse),
  and the trainer keeps its one direction (kubernetes -> cluster -> training):
  `asynctrain/components/trainer/training/` imports neither `asynctrain.components.trainer.cluster`
  nor `asynctrain.components.trainer.kubernetes`, and `asynctrain/components/trainer/cluster/`
  never imports `asynctrain.components.trainer.kubernetes`; the Kubeflow layer keeps its one
  direction too (local_backend -> compile -> container): `asynctrain/pipelines/kubeflow/container/`
  imports neither `compile` nor `local_backend`, and `compile/` never imports `local_backend`; and
  the command line, `asynctrain.cli`, is the top: no other package of the project imports it;
- imports from one component into another: a module of `asynctrain.components.X` imports
  another component's modules only through the shared home, `asynctrain.components.shared`, and
  the shared home imports no component;
- modules of `asynctrain.components` and `asynctrain.pipelines` over `--max-lines` lines (450;
  every line counts, blank and comment lines too, since they are read as well);
- and, as information only, every scanned module over `--warn-lines` lines (400).

An edge goes to the module an import names (`from a.b import c` is `a.b.c` when that is a module,
else `a.b`); the implicit import of parent packages' `__init__` is not an edge. Imports under
`if TYPE_CHECKING:` count as function-level: they never run.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import os
import sys
from collections.abc import Iterable, Sequence

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ('asynctrain',)
SIZE_CHECKED = ('asynctrain.components', 'asynctrain.pipelines')
MAX_LINES = 450
WARN_LINES = 400
# (importing package, imported package it must never reach): components below the pipeline layer
# and the benchmarks, docs generation and the test kit above both (nothing a run does imports
# them), the benches above the test kit, then the trainer's one direction and the Kubeflow
# layer's (local_backend -> compile -> container).
DIRECTION_RULES = (
    ('asynctrain.components', 'asynctrain.pipelines'),
    ('asynctrain.components', 'asynctrain.benchmarks'),
    ('asynctrain.components', 'asynctrain.docs_generation'),
    ('asynctrain.pipelines', 'asynctrain.docs_generation'),
    ('asynctrain.components', 'asynctrain.testing'),
    ('asynctrain.pipelines', 'asynctrain.testing'),
    ('asynctrain.testing', 'asynctrain.benchmarks'),
    ('asynctrain.components.trainer.training', 'asynctrain.components.trainer.cluster'),
    ('asynctrain.components.trainer.training', 'asynctrain.components.trainer.kubernetes'),
    ('asynctrain.components.trainer.cluster', 'asynctrain.components.trainer.kubernetes'),
    ('asynctrain.pipelines.kubeflow.container', 'asynctrain.pipelines.kubeflow.compile'),
    ('asynctrain.pipelines.kubeflow.container', 'asynctrain.pipelines.kubeflow.local_backend'),
    ('asynctrain.pipelines.kubeflow.compile', 'asynctrain.pipelines.kubeflow.local_backend'),
    # The command line is the top: only `python -m asynctrain` (asynctrain/__main__.py) imports it.
    ('asynctrain.components', 'asynctrain.cli'),
    ('asynctrain.pipelines', 'asynctrain.cli'),
    ('asynctrain.benchmarks', 'asynctrain.cli'),
    ('asynctrain.docs_generation', 'asynctrain.cli'),
    ('asynctrain.testing', 'asynctrain.cli'),
)
# Below the components, code more than one of them reads; the one way between components.
COMPONENTS = 'asynctrain.components'
SHARED = 'asynctrain.components.shared'


@dataclasses.dataclass(frozen=True)
class Import:
    """One import statement's target in a project module.

    Attributes:
      source: the importing module's dotted name.
      target: the dotted name imported, resolved against the project's modules where it is one.
      line: the statement's line in the importing file.
      module_level: whether it runs when the module is imported (not inside a function or under
        `if TYPE_CHECKING:`).
    """

    source: str
    target: str
    line: int
    module_level: bool


@dataclasses.dataclass(frozen=True)
class Report:
    """What `check` found.

    Attributes:
      module_level_cycles: strongly connected sets of modules (each sorted) through module-level
        imports only.
      cycles: the same through every import, function-level ones included.
      direction_violations: `path:line: module imports target (rule)` lines.
      oversized: `(path, lines)` of size-checked modules over the limit.
      long_modules: `(path, lines)` of every scanned module over the warning size.
    """

    module_level_cycles: list[list[str]]
    cycles: list[list[str]]
    direction_violations: list[str]
    oversized: list[tuple[str, int]]
    long_modules: list[tuple[str, int]]

    @property
    def ok(self) -> bool:
        return not (self.module_level_cycles or self.cycles or self.direction_violations) and (
            not self.oversized
        )


def find_modules(root: str, packages: Iterable[str]) -> dict[str, str]:
    """Dotted module name -> path relative to root, for every .py file under the packages."""
    modules = {}
    for package in packages:
        for directory, subdirs, files in os.walk(os.path.join(root, package)):
            subdirs[:] = sorted(d for d in subdirs if d != '__pycache__' and not d.startswith('.'))
            for name in sorted(files):
                if not name.endswith('.py'):
                    continue
                relative = os.path.relpath(os.path.join(directory, name), root)
                parts = relative[: -len('.py')].split(os.sep)
                if parts[-1] == '__init__':
                    parts = parts[:-1]
                modules['.'.join(parts)] = relative
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == 'TYPE_CHECKING') or (
        isinstance(test, ast.Attribute) and test.attr == 'TYPE_CHECKING'
    )


def _statements(tree: ast.AST) -> Iterable[tuple[ast.stmt, bool]]:
    """Every import statement with whether it runs at module import."""

    def walk(node: ast.AST, module_level: bool) -> Iterable[tuple[ast.stmt, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, module_level
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                yield from walk(child, False)
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for statement in child.body:
                    yield from walk(ast.Module(body=[statement], type_ignores=[]), False)
                for statement in child.orelse:
                    yield from walk(ast.Module(body=[statement], type_ignores=[]), module_level)
            else:
                yield from walk(child, module_level)

    yield from walk(tree, True)


def _resolve(name: str, modules: dict[str, str]) -> str | None:
    """The longest project module that `name` is or lies in; None outside the project."""
    parts = name.split('.')
    for end in range(len(parts), 0, -1):
        candidate = '.'.join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def read_imports(root: str, modules: dict[str, str]) -> list[Import]:
    """Every import of a project module by a project module."""
    imports = []
    for module, path in modules.items():
        with open(os.path.join(root, path), encoding='utf-8') as f:
            tree = ast.parse(f.read(), filename=path)
        is_package = path.endswith('__init__.py')
        for statement, module_level in _statements(tree):
            names = []
            if isinstance(statement, ast.Import):
                names = [alias.name for alias in statement.names]
            else:
                base = statement.module or ''
                if statement.level:
                    package = module.split('.')
                    if not is_package:
                        package = package[:-1]
                    package = package[: len(package) - (statement.level - 1)]
                    base = '.'.join(package + ([base] if base else []))
                names = [
                    f'{base}.{alias.name}' if base else alias.name for alias in statement.names
                ]
            for name in names:
                target = _resolve(name, modules)
                if target is not None and target != module:
                    imports.append(Import(module, target, statement.lineno, module_level))
    return imports


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(edges.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(found)


def _in_package(module: str, package: str) -> bool:
    return module == package or module.startswith(package + '.')


def _component(module: str) -> str | None:
    """The component package (or the shared home) `module` lies in; None outside them."""
    if not module.startswith(COMPONENTS + '.'):
        return None
    return '.'.join(module.split('.')[: COMPONENTS.count('.') + 2])


def _count_lines(path: str) -> int:
    with open(path, encoding='utf-8') as f:
        return sum(1 for _ in f)


def check(
    root: str = REPO,
    packages: Sequence[str] = PACKAGES,
    size_checked: Sequence[str] = SIZE_CHECKED,
    max_lines: int = MAX_LINES,
    warn_lines: int = WARN_LINES,
) -> Report:
    """Scans the packages under root and returns what breaks the rules."""
    modules = find_modules(root, packages)
    imports = read_imports(root, modules)
    module_level: dict[str, set[str]] = {m: set() for m in modules}
    every: dict[str, set[str]] = {m: set() for m in modules}
    for edge in imports:
        every[edge.source].add(edge.target)
        if edge.module_level:
            module_level[edge.source].add(edge.target)
    violations = []
    for edge in imports:
        for importer, forbidden in DIRECTION_RULES:
            if _in_package(edge.source, importer) and _in_package(edge.target, forbidden):
                violations.append(
                    f'{modules[edge.source]}:{edge.line}: {edge.source} imports {edge.target} '
                    f'({importer} must not import {forbidden})'
                )
        source, target = _component(edge.source), _component(edge.target)
        if source and target and source != target and target != SHARED:
            violations.append(
                f'{modules[edge.source]}:{edge.line}: {edge.source} imports {edge.target} '
                f'(a component imports another only through {SHARED})'
            )
    sizes = {path: _count_lines(os.path.join(root, path)) for path in modules.values()}
    oversized = sorted(
        (path, sizes[path])
        for module, path in modules.items()
        if sizes[path] > max_lines and any(_in_package(module, p) for p in size_checked)
    )
    long_modules = sorted((path, n) for path, n in sizes.items() if n > warn_lines)
    return Report(
        module_level_cycles=strongly_connected(module_level),
        cycles=strongly_connected(every),
        direction_violations=sorted(violations),
        oversized=oversized,
        long_modules=long_modules,
    )


def format_report(report: Report, max_lines: int = MAX_LINES, warn_lines: int = WARN_LINES) -> str:
    lines = []
    for cycle in report.module_level_cycles:
        lines.append(f'cycle (module-level imports): {" <-> ".join(cycle)}')
    for cycle in report.cycles:
        if cycle not in report.module_level_cycles:
            lines.append(f'cycle (through function-level imports): {" <-> ".join(cycle)}')
    lines += [f'direction: {v}' for v in report.direction_violations]
    lines += [f'size: {path}: {n} lines (limit {max_lines})' for path, n in report.oversized]
    lines += [f'note: {path}: {n} lines (over {warn_lines})' for path, n in report.long_modules]
    lines.append('import graph: ok' if report.ok else 'import graph: FAILED')
    return '\n'.join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('packages', nargs='*', default=list(PACKAGES), help='top-level packages')
    parser.add_argument('--root', default=REPO, help='directory holding the packages')
    parser.add_argument(
        '--size-checked',
        nargs='*',
        default=list(SIZE_CHECKED),
        help=f'dotted packages whose modules must stay under --max-lines (default {SIZE_CHECKED})',
    )
    parser.add_argument('--max-lines', type=int, default=MAX_LINES)
    parser.add_argument('--warn-lines', type=int, default=WARN_LINES)
    args = parser.parse_args(argv)
    report = check(args.root, args.packages, args.size_checked, args.max_lines, args.warn_lines)
    print(format_report(report, args.max_lines, args.warn_lines))
    return 0 if report.ok else 1


if __name__ == '__main__':
    sys.exit(main())
