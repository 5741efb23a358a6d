"""The quiet console: file descriptor 2 (this process's and its children's) goes to the run's log,
the log is scanned for signs of trouble, and a failure shows the lines that matter."""

import logging
import os
import re
import subprocess
import sys
import threading

from asynctrain.components.shared import console
from asynctrain.pipelines.local_runner import ComponentProgress

NOISY_LOG = """\
2026-12-01 INFO absl: Component Trainer is running.
E0000 00:00:1.0 context.cc:886] Failed to remove function remotely due to ...
Additional GRPC error information from remote target /job:ps/replica:0/task:1
[libprotobuf ERROR google/protobuf/wire_format_lite.cc:618] String field 'tensorflow.eager.Operation.device' contains invalid UTF-8 data
tensorflow.python.framework.errors_impl.InternalError: Unable to parse request
2026-12-01 INFO absl: Component Trainer is finished.
F0000 00:00:2.0 check.cc:1] Check failed: ok
ResourceExhaustedError: OOM when allocating tensor
"""


def test_stderr_of_this_process_and_its_children_goes_to_the_log(tmp_path, capfd):
    log_path = str(tmp_path / 'logs' / 'run.log')
    os.makedirs(os.path.dirname(log_path))
    with open(log_path, 'w') as f:
        f.write('before\n')

    with console.stderr_to_log(log_path):
        os.write(2, b'native line on fd 2\n')
        # A child's Python stderr and its native writes (pytest replaces this process's own
        # sys.stderr, so Python-level writes are checked in the child).
        child = 'import os, sys; print("child python line", file=sys.stderr, flush=True); '
        child += 'os.write(2, b"child line on fd 2\\n")'
        subprocess.run([sys.executable, '-c', child], check=True)
        print('progress on stdout')
    print('after, on stderr', file=sys.stderr)

    captured = capfd.readouterr()
    with open(log_path) as f:
        assert f.read().splitlines() == [
            'before',
            'native line on fd 2',
            'child python line',
            'child line on fd 2',
        ]
    assert 'progress on stdout' in captured.out
    # fd 2 is restored: only what came after reaches the console.
    assert captured.err == 'after, on stderr\n'


def test_scan_finds_each_kind_of_trouble_from_an_offset_and_ignores_teardown_noise(tmp_path):
    log_path = str(tmp_path / 'run.log')
    with open(log_path, 'w') as f:
        f.write(NOISY_LOG)

    found = console.scan(log_path)
    assert {name: len(lines) for name, lines in found.items()} == {
        'libprotobuf ERROR': 1,
        'Unable to parse request': 1,
        'Check failed': 1,
        'out of memory': 1,
    }
    assert found['Unable to parse request'] == [
        'tensorflow.python.framework.errors_impl.InternalError: Unable to parse request'
    ]
    offset = NOISY_LOG.index('F0000')
    assert list(console.scan(log_path, offset)) == ['Check failed', 'out of memory']

    line = console.trouble_line(found, log_path)
    assert line.startswith('    log: libprotobuf ERROR x1, Unable to parse request x1, ')
    assert line.endswith(f'see {log_path}')
    assert console.trouble_line({}, log_path) == ''


def test_lines_that_matter_leave_the_noise_out(tmp_path):
    log_path = str(tmp_path / 'run.log')
    with open(log_path, 'w') as f:
        f.write(NOISY_LOG)

    lines = console.lines_that_matter(log_path, limit=3)

    assert lines == [
        'tensorflow.python.framework.errors_impl.InternalError: Unable to parse request',
        'F0000 00:00:2.0 check.cc:1] Check failed: ok',
        'ResourceExhaustedError: OOM when allocating tensor',
    ]
    assert not any(
        'Failed to remove function remotely' in x for x in console.lines_that_matter(log_path)
    )


def test_a_finished_component_with_trouble_in_its_part_of_the_log_gets_one_line(tmp_path):
    import io

    log_path = str(tmp_path / 'run.log')
    with open(log_path, 'w') as f:
        f.write('libprotobuf ERROR from an earlier component\n')
    out = io.StringIO()
    progress = ComponentProgress(['Transform', 'Trainer'], out, log_path)

    def record(message):
        return logging.LogRecord('absl', logging.INFO, '', 0, message, ('Trainer',), None)

    progress.emit(record('Component %s is running.'))
    with open(log_path, 'a') as f:
        f.write('E1201 InternalError: Unable to parse request\n')
    progress.emit(record('Component %s is finished.'))

    lines = out.getvalue().splitlines()
    assert lines[0] == '[2/2] Trainer: running...'
    assert lines[1].startswith('[2/2] Trainer: done in ')
    # Only the Trainer's own part of the log counts.
    assert lines[2].startswith('    log: Unable to parse request x1 (first: E1201 InternalError')
    assert len(lines) == 3


def _record(message, *args, **attributes):
    record = logging.LogRecord('absl', logging.INFO, '', 0, message, args, None)
    record.__dict__.update(attributes)
    return record


def test_example_gen_end_line_has_its_row_counts_and_a_cached_component_says_so(tmp_path):
    import io

    from asynctrain.components.example_gen.spec import ROWS_RECORD_ATTRIBUTE

    out = io.StringIO()
    progress = ComponentProgress(['CsvExampleGen', 'StatisticsGen'], out, str(tmp_path / 'run.log'))
    progress.emit(_record('Component %s is running.', 'CsvExampleGen'))
    summary = {
        'rows_read': 15002,
        'rows_written': 15000,
        'rows_rejected': 2,
        'rows_written_per_split': {'train': 10001, 'eval': 4999},
    }
    # As the executor logs it: the dict is the message's argument and the record's attribute.
    progress.emit(
        _record('CSV ExampleGen summary: %s', summary, **{ROWS_RECORD_ATTRIBUTE: summary})
    )
    progress.emit(_record('Component %s is finished.', 'CsvExampleGen'))
    progress.emit(_record('Component %s is running.', 'StatisticsGen'))
    progress.emit(_record('A cached execution %d is used.', 19))
    progress.emit(_record('Component %s is finished.', 'StatisticsGen'))

    lines = out.getvalue().splitlines()
    assert lines[0] == '[1/2] CsvExampleGen: running...'
    assert re.fullmatch(
        r'\[1/2\] CsvExampleGen: done in \d+\.\ds, rows read 15002, written 15000 '
        r'\(train 10001, eval 4999\), rejected 2',
        lines[1],
    ), lines[1]
    assert lines[2] == '[2/2] StatisticsGen: running...'
    # The rows were CsvExampleGen's: they do not carry over to the next component.
    assert re.fullmatch(r'\[2/2\] StatisticsGen: done in \d+\.\ds \(from cache\)', lines[3])
    assert len(lines) == 4


def test_a_beam_component_shows_its_elapsed_time_until_it_ends(tmp_path):
    import io
    import time

    out = io.StringIO()
    progress = ComponentProgress(
        ['CsvExampleGen', 'Transform'],
        out,
        str(tmp_path / 'run.log'),
        beam_ids=['Transform'],
        interactive=False,
        elapsed_interval=0.05,
    )
    progress.emit(_record('Component %s is running.', 'Transform'))
    deadline = time.monotonic() + 30
    while out.getvalue().count('\n') < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    progress.emit(_record('Component %s is finished.', 'Transform'))
    ended = out.getvalue()
    # The elapsed line's thread ended with the component: nothing more can be written.
    assert 'elapsed [2/2] Transform' not in [t.name for t in threading.enumerate()]

    lines = ended.splitlines()
    assert lines[0] == '[2/2] Transform: running...'
    assert len(lines) >= 4
    assert all(re.fullmatch(r'\[2/2\] Transform: running, \d+s', line) for line in lines[1:-1])
    assert lines[-1].startswith('[2/2] Transform: done in ')
    # The elapsed line stops with the component.
    assert out.getvalue() == ended


def test_on_a_terminal_the_elapsed_time_is_one_line_redrawn_in_place_then_erased():
    import io
    import time

    out = io.StringIO()
    elapsed = console.ElapsedLine('[4/8] Transform', out, interactive=True)
    drawn_once = re.compile(r'\r\[4/8\] Transform: running\.\.\. 00:0\d')
    deadline = time.monotonic() + 30
    while not drawn_once.search(out.getvalue()) and time.monotonic() < deadline:
        time.sleep(0.05)
    elapsed.close()
    drawn = out.getvalue()
    assert '\n' not in drawn
    assert drawn_once.search(drawn), repr(drawn)
    # Erased at the end: the last thing written clears the line.
    assert drawn.endswith('\r')
