"""Runs the reliability tests and writes their outcome into the table of `docs/reliability.md`.

    python tools/reliability_report.py --run            # run the tests, then rewrite the section
    python tools/reliability_report.py --from-xml FILE  # rewrite it from an earlier JUnit XML run

The tests: everything under `tests/reliability/`, the pipeline-level fault tests
(`tests/e2e/pipeline_failure_e2e_test.py`, `tests/pipelines/local_runner_test.py`), the pod and
image hardening tests, and the training-fault tests under `tests/components/trainer/` whose names
hold one of the words kill, resume, fault, retry or worker. pytest writes JUnit XML
(`--junitxml`); each row of the table is one test case: the fault or bad input tried (the first
line of the test's docstring, plus its parameters), the result, and the test id. Only the text
between `<!-- reliability:start -->` and `<!-- reliability:end -->` changes.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import datetime
import functools
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
START = '<!-- reliability:start -->'
END = '<!-- reliability:end -->'
TEST_PATHS = (
    'tests/reliability',
    'tests/e2e/pipeline_failure_e2e_test.py',
    'tests/pipelines/local_runner_test.py',
    'tests/pipelines/dockerfile_test.py::test_runs_as_a_numeric_non_root_user_matching_the_tfjob_pods',
    'tests/components/trainer/kubernetes/tfjob_test.py::'
    'test_tfjob_pods_are_non_root_unprivileged_limited_and_scheduled_on_the_training_pool',
)
# Tests of this tool itself: they try no fault, so they stay out of the table.
NOT_FAULT_TESTS = ('tests/reliability/report_tool_test.py',)
TRAINER_TESTS = 'tests/components/trainer'
# Whole words of a test name (split at '_'): `killed` counts, `defaults` does not hold `fault`.
TRAINING_FAULT_WORD = re.compile(r'^(kill|resum|fault|retr(y|ies|ied)|worker)')


@dataclasses.dataclass(frozen=True)
class CaseResult:
    """One test case of the JUnit XML.

    Attributes:
      test_id: pytest's node id, `path::name[params]`.
      tried: The fault or bad input tried: the docstring's first line, plus the parameters.
      result: `passed`, `failed` or `skipped`.
    """

    test_id: str
    tried: str
    result: str


def training_fault_tests(root: str = REPO) -> list[str]:
    """Node ids of the trainer tests whose names say they inject a fault."""
    ids = []
    directory = os.path.join(root, TRAINER_TESTS)
    paths = sorted(
        os.path.relpath(os.path.join(folder, name), directory)
        for folder, _, names in os.walk(directory)
        for name in names
        if name.endswith('_test.py')
    )
    for name in paths:
        path = os.path.join(directory, name)
        with open(path, encoding='utf-8') as f:
            tree = ast.parse(f.read())
        for node in tree.body:
            if (
                isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                and node.name.startswith('test_')
                and any(TRAINING_FAULT_WORD.match(w) for w in node.name.split('_')[1:])
            ):
                ids.append(f'{TRAINER_TESTS}/{name}::{node.name}')
    return ids


def test_targets(root: str = REPO) -> list[str]:
    """What `--run` hands pytest: the fixed paths that exist, then the training-fault tests."""
    fixed = [t for t in TEST_PATHS if os.path.exists(os.path.join(root, t.split('::')[0]))]
    return fixed + training_fault_tests(root)


def is_reliability_test(test_id: str, targets: Sequence[str]) -> bool:
    """Whether `test_id` (path::name) is one of `targets` (folders, files or path::name)."""
    if test_id.split('::')[0] in NOT_FAULT_TESTS:
        return False
    for target in targets:
        if '::' in target:
            if test_id == target or test_id.startswith(target + '['):
                return True
        elif test_id.split('::')[0] == target or test_id.startswith(target.rstrip('/') + '/'):
            return True
    return False


def run_tests(xml_path: str, targets: Sequence[str]) -> int:
    """Runs pytest (every marker tier) on `targets`, writing JUnit XML; returns its exit status."""
    command = [
        sys.executable,
        '-m',
        'pytest',
        '-p',
        'no:cacheprovider',
        '-q',
        f'--junitxml={xml_path}',
        *(f'--ignore={t}' for t in NOT_FAULT_TESTS),
        *targets,
    ]
    print('$ ' + ' '.join(command), flush=True)
    return subprocess.call(command, cwd=REPO)


@functools.cache
def _docstrings(path: str) -> dict[str, str]:
    """First docstring line of every test function in one file, by name (methods as Class.name)."""
    try:
        with open(path, encoding='utf-8') as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError):
        return {}
    found = {}
    for node in tree.body:
        nodes = [(getattr(node, 'name', ''), node)]
        if isinstance(node, ast.ClassDef):
            nodes = [(f'{node.name}.{getattr(n, "name", "")}', n) for n in node.body]
        for name, item in nodes:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(item)
                found[name] = doc.strip().splitlines()[0].strip() if doc else ''
    return found


def _locate(classname: str, root: str) -> tuple[str, str]:
    """(file path relative to root, class prefix) of a JUnit classname like `tests.a.b_test.C`."""
    parts = classname.split('.')
    for cut in range(len(parts), 0, -1):
        relative = '/'.join(parts[:cut]) + '.py'
        if os.path.exists(os.path.join(root, relative)):
            return relative, '.'.join(parts[cut:])
    return '/'.join(parts) + '.py', ''


def read_junit(xml_path: str, root: str = REPO) -> list[CaseResult]:
    """Every test case of a JUnit XML file, in the order pytest ran them."""
    cases = []
    for case in ET.parse(xml_path).getroot().iter('testcase'):
        path, owner = _locate(case.get('classname', ''), root)
        name = case.get('name', '')
        function, _, params = name.partition('[')
        key = f'{owner}.{function}' if owner else function
        tried = _docstrings(os.path.join(root, path)).get(key) or function.replace('_', ' ')
        if params:
            tried += f' ({params.rstrip("]")})'
        if case.find('failure') is not None or case.find('error') is not None:
            result = 'failed'
        elif case.find('skipped') is not None:
            result = 'skipped'
        else:
            result = 'passed'
        test_id = f'{path}::{owner + "::" if owner else ""}{name}'
        cases.append(CaseResult(test_id, tried, result))
    return cases


def render(cases: Iterable[CaseResult], when: str, command: str) -> str:
    """The section's body: a summary line and one table row per test case (links relative to
    `docs/`)."""
    cases = list(cases)
    counts = {r: sum(c.result == r for c in cases) for r in ('passed', 'failed', 'skipped')}
    summary = ', '.join(f'{n} {r}' for r, n in counts.items() if n) or 'no tests'
    lines = [
        f'Generated by `{command}` on {when}: {summary}. Each row is one test that injects the '
        'fault or feeds the bad input; the bad-CSV corpus is described in '
        '[tests/data/bad_csv/README.md](../tests/data/bad_csv/README.md).',
        '',
        '| Fault or bad input tried | Result | Test |',
        '|---|---|---|',
    ]
    for case in cases:
        tried = case.tried.replace('|', '\\|')
        result = case.result if case.result == 'passed' else f'**{case.result}**'
        lines.append(f'| {tried} | {result} | `{case.test_id}` |')
    return '\n'.join(lines)


def replace_section(text: str, body: str) -> str:
    """`text` with everything between the two markers replaced by `body`."""
    start, end = text.find(START), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f'the page needs {START} followed by {END}')
    return text[: start + len(START)] + '\n' + body + '\n' + text[end:]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument('--run', action='store_true', help='run the tests, then write the section')
    source.add_argument('--from-xml', metavar='FILE', help='JUnit XML of an earlier run')
    parser.add_argument('--page', default=os.path.join(REPO, 'docs', 'reliability.md'))
    parser.add_argument(
        '--junitxml',
        metavar='FILE',
        help='with --run: keep the JUnit XML here (default: a temporary file)',
    )
    args = parser.parse_args(argv)

    status = 0
    if args.run:
        xml_path = args.junitxml or os.path.join(tempfile.mkdtemp(), 'reliability.xml')
        status = run_tests(xml_path, test_targets())
        if not os.path.exists(xml_path):
            print(f'pytest wrote no JUnit XML (exit status {status})', file=sys.stderr)
            return status or 1
        command = 'python tools/reliability_report.py --run'
    else:
        xml_path = args.from_xml
        command = 'python tools/reliability_report.py --from-xml FILE'
    cases = read_junit(xml_path)
    if not args.run:
        # An XML of a whole-suite run (e.g. `make test`) holds more than the reliability tests.
        cases = [c for c in cases if is_reliability_test(c.test_id, test_targets())]
    when = datetime.datetime.fromtimestamp(
        os.path.getmtime(xml_path), datetime.timezone.utc
    ).strftime('%Y-%m-%d %H:%M UTC')
    with open(args.page, encoding='utf-8') as f:
        text = f.read()
    with open(args.page, 'w', encoding='utf-8') as f:
        f.write(replace_section(text, render(cases, when, command)))
    failed = [c.test_id for c in cases if c.result == 'failed']
    print(f'{args.page}: {len(cases)} tests, {len(failed)} failed')
    return 1 if failed else status


if __name__ == '__main__':
    sys.exit(main())
