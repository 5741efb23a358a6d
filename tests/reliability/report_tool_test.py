"""`tools/reliability_report.py`: which tests it picks, how it reads JUnit XML, and that it
rewrites only the page's text between the reliability markers."""

import importlib.util
import pathlib
import sys

import pytest

TOOL = pathlib.Path(__file__).resolve().parents[2] / 'tools' / 'reliability_report.py'


@pytest.fixture(scope='module')
def report():
    spec = importlib.util.spec_from_file_location('reliability_report', TOOL)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def test_picks_training_fault_tests_by_whole_words(report, tmp_path):
    """Report tool: trainer tests named kill/resume/fault/retry/worker picked, 'defaults' not"""
    trainer = tmp_path / 'tests' / 'components' / 'trainer'
    trainer.mkdir(parents=True)
    (trainer / 'a_test.py').write_text(
        'def test_killed_ps_restarts():\n  pass\n\n'
        'def test_defaults_round_trip():\n  pass\n\n'
        'def test_recurring_fault_retries_then_fails():\n  pass\n\n'
        'def test_rerun_resumes_from_checkpoint():\n  pass\n'
    )
    (trainer / 'helper.py').write_text('def test_kill():\n  pass\n')
    assert report.training_fault_tests(str(tmp_path)) == [
        'tests/components/trainer/a_test.py::test_killed_ps_restarts',
        'tests/components/trainer/a_test.py::test_recurring_fault_retries_then_fails',
        'tests/components/trainer/a_test.py::test_rerun_resumes_from_checkpoint',
    ]


def test_reads_results_and_docstrings_from_junit_xml(report, tmp_path):
    """Report tool: JUnit XML to rows of (fault tried, result, test id), docstring first line"""
    tests = tmp_path / 'tests' / 'x'
    tests.mkdir(parents=True)
    (tests / 'f_test.py').write_text(
        'import pytest\n\n'
        'def test_ok():\n  """A killed worker: training completes.\n\n  More text."""\n\n'
        'def test_bad(name):\n  """Bad file | odd: rows rejected"""\n\n'
        'class TestGroup:\n  """Group."""\n\n  def test_skip(self):\n    """Skipped on this machine"""\n'
    )
    xml = tmp_path / 'r.xml'
    xml.write_text(
        '<testsuites><testsuite>'
        '<testcase classname="tests.x.f_test" name="test_ok" />'
        '<testcase classname="tests.x.f_test" name="test_bad[a.csv]"><failure message="x"/>'
        '</testcase>'
        '<testcase classname="tests.x.f_test.TestGroup" name="test_skip"><skipped/></testcase>'
        '<testcase classname="tests.x.f_test" name="test_gone"><error message="y"/></testcase>'
        '</testsuite></testsuites>'
    )
    cases = report.read_junit(str(xml), str(tmp_path))
    assert [(c.tried, c.result, c.test_id) for c in cases] == [
        ('A killed worker: training completes.', 'passed', 'tests/x/f_test.py::test_ok'),
        ('Bad file | odd: rows rejected (a.csv)', 'failed', 'tests/x/f_test.py::test_bad[a.csv]'),
        ('Skipped on this machine', 'skipped', 'tests/x/f_test.py::TestGroup::test_skip'),
        ('test gone', 'failed', 'tests/x/f_test.py::test_gone'),
    ]
    table = report.render(cases, '2026-01-01 00:00 UTC', 'cmd')
    assert '1 passed, 2 failed, 1 skipped' in table
    assert '| Bad file \\| odd: rows rejected (a.csv) | **failed** |' in table


def test_rewrites_only_between_the_markers(report):
    """Report tool: the page's text outside the reliability markers is left byte for byte"""
    text = f'# T\n\nbefore\n{report.START}\nold\n{report.END}\nafter\n'
    assert report.replace_section(text, 'new') == (
        f'# T\n\nbefore\n{report.START}\nnew\n{report.END}\nafter\n'
    )
    with pytest.raises(ValueError, match='the page needs'):
        report.replace_section('no markers', 'new')
