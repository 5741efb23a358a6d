"""The resident-set sampler counts child processes, and each component gets its own interval's peak."""

import subprocess
import sys
import time

from asynctrain.benchmarks import memory

_MB = 1 << 20


def test_sampler_counts_a_child_process_memory_while_it_lives():
    sampler = memory.TreeRssSampler(interval=0.05).start()
    before = time.time()
    child = subprocess.Popen(
        [
            sys.executable,
            '-c',
            'import sys, time; block = bytearray(300 << 20); block[::4096] = b"x" * len(block[::4096]);'
            ' print("ready", flush=True); time.sleep(1.5)',
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout.readline().strip() == 'ready'
    child.wait(timeout=30)
    after = time.time()
    time.sleep(0.3)
    samples = sampler.stop()

    baseline = samples.rss[0] / _MB
    assert samples.times == sorted(samples.times)
    # The child's 300 MiB touched pages show while it lives, and are gone after it exits.
    assert samples.peak_mb(before, after) >= baseline + 290
    assert samples.rss[-1] / _MB < baseline + 100


def test_component_peaks_take_the_largest_sample_inside_each_interval():
    samples = memory.Samples(
        times=[0.0, 1.0, 2.0, 3.0, 4.0], rss=[m * _MB for m in (10, 50, 20, 30, 5)]
    )

    peaks = memory.component_peaks_mb(
        samples, {'A': (0.5, 2.5), 'B': (2.9, 4.0), 'short': (3.2, 3.4)}
    )

    assert peaks == {
        'A': 50.0,
        'B': 30.0,
        'short': 30.0,
    }  # `short` holds no sample: its neighbours bound it.
    assert samples.peak_mb(4.5, 5.0) is None


def test_tree_rss_is_at_least_this_process_rss():
    import psutil

    process = psutil.Process()
    assert memory.tree_rss_bytes(process) >= process.memory_info().rss * 0.9
