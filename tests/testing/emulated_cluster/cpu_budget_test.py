"""A host's CPU budget: the quota written where each cgroup version keeps it, a clear refusal where
none can be written, and, on this machine's own cgroups, a busy process held to its share (read
from the group's counters, not from a clock)."""

import pathlib
import subprocess
import sys

import pytest

from asynctrain.testing.emulated_cluster import check, cpu_budget

CPUS = 0.2
# Enough periods of 100 ms for the share to settle, few enough to keep the test's CPU small.
PERIODS = 20


def _write(path: pathlib.Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _v2_tree(tmp_path: pathlib.Path, own: str) -> tuple[pathlib.Path, pathlib.Path]:
    """A cgroup v2 mount at tmp_path/cg with this process in `own`; the mounts and own-cgroup
    files."""
    mount = tmp_path / 'cg'
    own_dir = mount / own.lstrip('/')
    _write(own_dir / 'cgroup.controllers', 'cpuset cpu io memory pids\n')
    _write(own_dir.parent / 'cgroup.controllers', 'cpuset cpu io memory pids\n')
    _write(own_dir.parent / 'cgroup.subtree_control', 'memory\n')
    _write(tmp_path / 'mounts', f'cgroup2 {mount} cgroup2 rw,nosuid,nodev,noexec 0 0\n')
    _write(tmp_path / 'cgroup', f'0::{own}\n')
    return tmp_path / 'mounts', tmp_path / 'cgroup'


def test_v2_budget_is_made_beside_this_process_group_with_cpu_delegated(tmp_path):
    mounts, own = _v2_tree(tmp_path, '/jobs/runner')

    hierarchy = cpu_budget.find_hierarchy(mounts, own)
    group = cpu_budget.CpuCgroup.create('host-a', 0.25, hierarchy)

    parent = tmp_path / 'cg' / 'jobs'
    assert hierarchy == cpu_budget.Hierarchy(2, parent)
    assert (parent / 'cgroup.subtree_control').read_text() == '+cpu'
    assert group.path == parent / 'host-a'
    assert (group.path / 'cpu.max').read_text() == '25000 100000'
    assert group.procs_files == [str(parent / 'host-a' / 'cgroup.procs')]


def test_v1_with_cpuacct_mounted_beside_cpu_keeps_quota_and_usage_in_one_group(tmp_path):
    root = tmp_path / 'cpu,cpuacct'
    for name in ('cpu.cfs_quota_us', 'cpu.cfs_period_us', 'cpuacct.usage'):
        _write(root / name, '0\n')
    _write(tmp_path / 'mounts', f'cgroup {root} cgroup rw,nosuid,cpu,cpuacct 0 0\n')
    _write(tmp_path / 'cgroup', '4:cpu,cpuacct:/\n')

    hierarchy = cpu_budget.find_hierarchy(tmp_path / 'mounts', tmp_path / 'cgroup')
    group = cpu_budget.CpuCgroup.create('host-b', 1.5, hierarchy)

    assert hierarchy == cpu_budget.Hierarchy(1, root)
    assert group.folders == [root / 'host-b']
    assert (root / 'host-b' / 'cpu.cfs_period_us').read_text() == '100000'
    assert (root / 'host-b' / 'cpu.cfs_quota_us').read_text() == '150000'
    _write(root / 'host-b' / 'cpuacct.usage', '2500000000\n')
    _write(root / 'host-b' / 'cpu.stat', 'nr_periods 40\nnr_throttled 3\nthrottled_time 90000000\n')
    assert group.stats() == cpu_budget.CpuStats(
        usage_s=2.5, periods=40, throttled_periods=3, throttled_s=0.09
    )


def test_v2_stats_read_usage_and_throttling_in_microseconds(tmp_path):
    hierarchy = cpu_budget.Hierarchy(2, tmp_path)
    _write(
        tmp_path / 'h' / 'cpu.stat',
        'usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n'
        'nr_periods 30\nnr_throttled 12\nthrottled_usec 2500000\n',
    )

    stats = cpu_budget.CpuCgroup(hierarchy, 'h', 0.5).stats()

    assert stats == cpu_budget.CpuStats(
        usage_s=1.5, periods=30, throttled_periods=12, throttled_s=2.5
    )


def test_no_writable_quota_is_refused_with_what_was_found(tmp_path):
    # A v1 cpu hierarchy without the CFS quota file, and no v2 mount.
    _write(tmp_path / 'cpu' / 'cpu.shares', '1024\n')
    _write(tmp_path / 'mounts', f'cgroup {tmp_path / "cpu"} cgroup rw,cpu 0 0\n')
    _write(tmp_path / 'cgroup', '1:cpu:/\n0::/\n')

    with pytest.raises(cpu_budget.CpuBudgetUnavailable) as refused:
        cpu_budget.find_hierarchy(tmp_path / 'mounts', tmp_path / 'cgroup')

    message = str(refused.value)
    assert 'cpu.cfs_quota_us' in message and 'cpu.max' in message
    assert f'{tmp_path / "cpu"} (cgroup: cpu,rw)' in message


def test_a_budget_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match='cpus: got 0'):
        cpu_budget.CpuCgroup.create('h', 0, cpu_budget.Hierarchy(2, tmp_path))


@pytest.mark.integration
def test_a_quota_throttles_a_busy_process_to_its_share():
    share = check.measure_cpu(CPUS, PERIODS)

    assert share.periods >= PERIODS
    # A busy loop outruns its quota in almost every period (30 of 32 measured here); the
    # machine's other load can only lower that.
    assert share.throttled_periods >= share.periods // 2
    # At most its quota per period (plus a period's worth at the edges of the window); at least
    # a fraction of it, generous for a loaded machine.
    assert CPUS * 0.4 <= share.used_cpus <= CPUS * 1.3


_READY_THEN_WAIT = 'import sys; print("ready", flush=True); sys.stdin.read()'


@pytest.mark.integration
def test_a_process_started_under_a_group_runs_in_it_and_the_group_is_removed_after_it():
    group = cpu_budget.CpuCgroup.create(cpu_budget.group_name('test'), CPUS)
    process = subprocess.Popen(
        [*group.entering_command(), sys.executable, '-c', _READY_THEN_WAIT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert process.stdout.readline() == b'ready\n'  # Python runs: the shell joined before
        assert group.pids() == [process.pid]  # and exec'd it in the same process
    finally:
        process.stdin.close()
        process.wait()
        group.remove()

    assert process.returncode == 0
    assert not any(pathlib.Path(folder).exists() for folder in group.folders)


@pytest.mark.integration
def test_the_empty_group_of_a_process_that_died_is_removed_by_the_next_one_made():
    gone = subprocess.run(
        [sys.executable, '-c', 'import os; print(os.getpid())'], capture_output=True
    )
    dead_pid = int(gone.stdout)
    orphan = cpu_budget.CpuCgroup.create(f'{cpu_budget.GROUP_PREFIX}{dead_pid}-worker-0', CPUS)
    assert orphan.path.is_dir()

    group = cpu_budget.CpuCgroup.create(cpu_budget.group_name('worker-0'), CPUS)
    try:
        assert not any(pathlib.Path(folder).exists() for folder in orphan.folders)
        assert group.path.is_dir()  # this process's own group stays
    finally:
        group.remove()
