"""The resident-set sampler counts child processes, and each component gets its own interval's peak;
a spawned callable's and a `python -m` child's results come back, with their peak memory."""

import json
import operator
import subprocess
import sys
import time

import psutil

from asynctrain.testing import child_runs

_MB = 1 << 20


def _wait_for_a_sample_after(sampler: child_runs.TreeRssSampler, moment: float) -> None:
    deadline = time.monotonic() + 30
    while max(sampler.samples.times) <= moment and time.monotonic() < deadline:
        time.sleep(0.05)


def test_sampler_counts_a_child_process_memory_while_it_lives():
    sampler = child_runs.TreeRssSampler(interval=0.05).start()
    before = time.time()
    # The child holds 300 MiB of touched pages until its stdin closes.
    child = subprocess.Popen(
        [
            sys.executable,
            '-c',
            'import sys; block = bytearray(300 << 20); block[::4096] = b"x" * len(block[::4096]);'
            ' print("ready", flush=True); sys.stdin.read()',
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout.readline().strip() == 'ready'
    _wait_for_a_sample_after(sampler, time.time())
    child.stdin.close()
    child.wait(timeout=30)
    after = time.time()
    _wait_for_a_sample_after(sampler, after)
    samples = sampler.stop()

    baseline = samples.rss[0] / _MB
    assert samples.times == sorted(samples.times)
    # The child's 300 MiB touched pages show while it lives, and are gone after it exits.
    assert samples.peak_mb(before, after) >= baseline + 290
    assert samples.rss[-1] / _MB < baseline + 100


def test_component_peaks_take_the_largest_sample_inside_each_interval():
    samples = child_runs.Samples(
        times=[0.0, 1.0, 2.0, 3.0, 4.0], rss=[m * _MB for m in (10, 50, 20, 30, 5)]
    )

    peaks = child_runs.component_peaks_mb(
        samples, {'A': (0.5, 2.5), 'B': (2.9, 4.0), 'short': (3.2, 3.4)}
    )

    assert peaks == {
        'A': 50.0,
        'B': 30.0,
        'short': 30.0,
    }  # `short` holds no sample: its neighbours bound it.
    assert samples.peak_mb(4.5, 5.0) is None


def test_tree_rss_is_at_least_this_process_rss():
    process = psutil.Process()
    assert child_runs.tree_rss_bytes(process) >= process.memory_info().rss * 0.9


def test_a_spawned_callable_returns_what_it_put_and_its_tree_peak():
    # The target must be importable by the spawned child, which a test module need not be: a
    # stdlib callable, `queue.put(answer)` once called with the child's queue.
    answer, peak_mb = child_runs.run_spawned(operator.methodcaller('put', {'rows': 7}), ())

    assert answer == {'rows': 7}
    assert peak_mb > 0  # the child's resident set, sampled from here while it lived
    assert child_runs.run_spawned(operator.methodcaller('no_such_method'), ()) is None


def test_a_module_run_reads_back_the_json_on_its_last_line(tmp_path):
    path = tmp_path / 'result.json'
    path.write_text(json.dumps({'seconds': 1.5, 'variant': 'ours'}, indent=2))

    done = child_runs.run_module('json.tool', ['--compact', str(path)])
    failed = child_runs.run_module('json.tool', [str(tmp_path / 'missing.json')])

    assert (done.returncode, done.result) == (0, {'seconds': 1.5, 'variant': 'ours'})
    assert failed.returncode != 0 and failed.result is None
    assert 'missing.json' in failed.stderr


def test_a_module_run_gets_the_environment_it_is_given(tmp_path):
    path = tmp_path / 'result.json'
    path.write_text('{}')
    hook = tmp_path / 'sitecustomize.py'
    hook.write_text('import sys; print("site hook ran", file=sys.stderr)\n')

    done = child_runs.run_module('json.tool', [str(path)], env={'PYTHONPATH': str(tmp_path)})

    assert done.result == {}
    assert 'site hook ran' in done.stderr


def test_own_peak_is_at_least_this_process_resident_set():
    assert child_runs.own_peak_rss_mb() >= psutil.Process().memory_info().rss / _MB * 0.99
