"""What every bench prints as it runs: one progress line format, on the stream a test captures."""

import os
import re

from asynctrain.benchmarks import report


def test_progress_lines_name_the_bench_and_the_time_on_the_stream_asked_for(capsys):
    report.progress('input')('round 1 of 3')
    report.progress('evaluator', stderr=True)('ours: 2.0 s')

    captured = capsys.readouterr()
    assert re.fullmatch(r'\[bench input \d\d:\d\d:\d\d\] round 1 of 3\n', captured.out)
    assert re.fullmatch(r'\[bench evaluator \d\d:\d\d:\d\d\] ours: 2\.0 s\n', captured.err)


def test_libraries_to_log_says_where_and_sends_descriptor_2_there_until_the_block_ends(
    tmp_path, capfd
):
    printed = []
    log_path = tmp_path / 'logs' / 'bench.log'  # its folder does not exist yet

    with report.libraries_to_log(printed.append, str(log_path)):
        os.write(2, b'a TensorFlow warning\n')
    os.write(2, b'after the block\n')

    assert printed == [f'log {log_path} (TensorFlow, TFX and Beam)']
    assert log_path.read_text() == 'a TensorFlow warning\n'
    assert capfd.readouterr().err == 'after the block\n'
