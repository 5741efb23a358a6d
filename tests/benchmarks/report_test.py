"""What every bench prints as it runs: one progress line format, on the stream a test captures."""

import re

from asynctrain.benchmarks import report


def test_progress_lines_name_the_bench_and_the_time_on_the_stream_asked_for(capsys):
    report.progress('input')('round 1 of 3')
    report.progress('evaluator', stderr=True)('ours: 2.0 s')

    captured = capsys.readouterr()
    assert re.fullmatch(r'\[bench input \d\d:\d\d:\d\d\] round 1 of 3\n', captured.out)
    assert re.fullmatch(r'\[bench evaluator \d\d:\d\d:\d\d\] ours: 2\.0 s\n', captured.err)
