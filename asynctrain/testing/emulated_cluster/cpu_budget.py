"""A CPU budget for one emulated host: a cgroup of its own whose CFS quota caps the CPU time its
processes get, the way a Kubernetes CPU limit caps a container's.

A budget of `cpus` lets the group run `cpus * period` of CPU time per scheduling period (100 ms);
past that the kernel throttles every thread of the group until the next period. Two kinds of
cgroup file system hold the knob:

- cgroup v1, the `cpu` controller's hierarchy: `cpu.cfs_period_us` and `cpu.cfs_quota_us`, with
  `cpu.stat`'s `nr_throttled` and `throttled_time` (ns); CPU time from the `cpuacct` controller
  (`cpuacct.usage`, ns), mounted with `cpu` or in a hierarchy of its own, where the group is made
  too;
- cgroup v2: `cpu.max` ("quota period"), with `cpu.stat`'s `usage_usec`, `nr_throttled` and
  `throttled_usec`; the parent must delegate the controller (`+cpu` in its
  `cgroup.subtree_control`).

Both need write access to the hierarchy (root, or a delegated subtree); where neither can be
written, `CpuCgroup.create` raises `CpuBudgetUnavailable` naming what it found.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import re
import shlex
import time

PERIOD_US = 100_000
# Every group this kit makes is `asynctrain-<pid of the process that made it>-<label>`.
GROUP_PREFIX = 'asynctrain-'
_GROUP_NAME = re.compile(rf'{GROUP_PREFIX}(\d+)-')
MOUNTS = pathlib.Path('/proc/self/mounts')
OWN_CGROUPS = pathlib.Path('/proc/self/cgroup')


class CpuBudgetUnavailable(RuntimeError):
    """No cgroup's CPU quota can be written on this machine (or by this user)."""


@dataclasses.dataclass(frozen=True)
class CpuStats:
    """What a group's counters say since it was made.

    Attributes:
      usage_s: CPU time its processes used, in seconds (every thread, user and system).
      periods: scheduling periods in which it had runnable threads.
      throttled_periods: those of them in which it ran out of quota.
      throttled_s: time its threads spent throttled, in seconds.
    """

    usage_s: float
    periods: int
    throttled_periods: int
    throttled_s: float


@dataclasses.dataclass(frozen=True)
class Hierarchy:
    """Where this machine's CPU quota lives.

    Attributes:
      version: 1 or 2.
      cpu_root: the folder in which a group is made: this process's own cgroup (v1) or its
        parent (v2, whose groups hold processes only at the leaves), under the mount point.
      cpuacct_root: v1's `cpuacct` folder for the same group when that controller is mounted
        apart from `cpu`; None when `cpu_root` holds the usage too (or v2).
    """

    version: int
    cpu_root: pathlib.Path
    cpuacct_root: pathlib.Path | None = None


def _mounts(mounts: pathlib.Path) -> list[tuple[pathlib.Path, str, set[str]]]:
    """(mount point, file system type, options) of every cgroup mount."""
    found = []
    for line in mounts.read_text().splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[2] in ('cgroup', 'cgroup2'):
            found.append((pathlib.Path(fields[1]), fields[2], set(fields[3].split(','))))
    return found


def _own_paths(own_cgroups: pathlib.Path) -> dict[str, str]:
    """This process's cgroup path by controller ('' for the v2 hierarchy)."""
    paths = {}
    for line in own_cgroups.read_text().splitlines():
        _, controllers, path = line.split(':', 2)
        for controller in controllers.split(',') if controllers else ['']:
            paths[controller] = path
    return paths


def _under(mount: pathlib.Path, path: str) -> pathlib.Path:
    return mount / path.lstrip('/')


def _v1(mounts: list, own: dict) -> Hierarchy | None:
    cpu = next((m for m, kind, opts in mounts if kind == 'cgroup' and 'cpu' in opts), None)
    if cpu is None:
        return None
    root = _under(cpu, own.get('cpu', '/'))
    if not (os.access(root, os.W_OK) and (root / 'cpu.cfs_quota_us').exists()):
        return None
    if (root / 'cpuacct.usage').exists():
        return Hierarchy(1, root)
    acct = next((m for m, kind, opts in mounts if kind == 'cgroup' and 'cpuacct' in opts), None)
    acct_root = _under(acct, own.get('cpuacct', '/')) if acct is not None else None
    if acct_root is None or not os.access(acct_root, os.W_OK):
        return None
    return Hierarchy(1, root, acct_root)


def _v2(mounts: list, own: dict) -> Hierarchy | None:
    mount = next((m for m, kind, _ in mounts if kind == 'cgroup2'), None)
    if mount is None:
        return None
    path = own.get('', '/')
    # A group with processes of its own cannot hand controllers to children: make the budgets
    # beside this process's group, below its parent (the root is exempt).
    root = _under(mount, path) if path == '/' else _under(mount, path).parent
    controllers = root / 'cgroup.subtree_control'
    if not os.access(controllers, os.W_OK) or 'cpu' not in _read(root / 'cgroup.controllers'):
        return None
    if 'cpu' not in _read(controllers).split():
        try:
            controllers.write_text('+cpu')
        except OSError:
            return None
    return Hierarchy(2, root)


def _read(path: pathlib.Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ''


def find_hierarchy(mounts: pathlib.Path = MOUNTS, own_cgroups: pathlib.Path = OWN_CGROUPS):
    """The writable hierarchy that holds CPU quotas here, v1's `cpu` controller first.

    Raises:
      CpuBudgetUnavailable: neither a writable v1 `cpu` controller nor a v2 hierarchy that
        delegates `cpu` to a writable folder (the message lists the cgroup mounts found).
    """
    found = _mounts(mounts)
    own = _own_paths(own_cgroups)
    hierarchy = _v1(found, own) or _v2(found, own)
    if hierarchy is None:
        listed = ', '.join(f'{m} ({kind}: {",".join(sorted(o))})' for m, kind, o in found)
        raise CpuBudgetUnavailable(
            "a host's CPU budget needs a cgroup whose CPU quota this process can write: cgroup "
            "v1's cpu controller (cpu.cfs_quota_us, with cpuacct) or cgroup v2's cpu.max under "
            'a parent whose cgroup.subtree_control takes +cpu; run as root or in a delegated '
            f'cgroup. Cgroup mounts here: {listed or "none"}'
        )
    return hierarchy


def group_name(label: str) -> str:
    """The name of a group this process makes for `label` (a host's task, say)."""
    return f'{GROUP_PREFIX}{os.getpid()}-{label}'


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process
    return True


def remove_orphans(hierarchy: Hierarchy) -> list[str]:
    """Removes the empty groups of processes that are gone (killed before they could remove their
    own); returns their names."""
    removed = []
    for folder in sorted(hierarchy.cpu_root.glob(f'{GROUP_PREFIX}*')):
        made_by = _GROUP_NAME.match(folder.name)
        if made_by is None or _running(int(made_by.group(1))):
            continue
        if _read(folder / 'cgroup.procs').split():
            continue  # a process still runs in it: not ours to judge
        CpuCgroup(hierarchy, folder.name, cpus=0.0).remove()
        removed.append(folder.name)
    return removed


@dataclasses.dataclass
class CpuCgroup:
    """One host's cgroup with its CPU quota; `remove` deletes it (its processes gone first).

    Attributes:
      hierarchy: where it lives.
      name: the group's folder name.
      cpus: the budget, in CPUs (0.25: a quarter of one CPU's time).
    """

    hierarchy: Hierarchy
    name: str
    cpus: float

    @classmethod
    def create(cls, name: str, cpus: float, hierarchy: Hierarchy | None = None) -> CpuCgroup:
        """Makes the group `name` (see `group_name`) with a quota of `cpus` CPUs per period of
        100 ms, after removing the groups of processes that died without removing theirs."""
        if cpus <= 0:
            raise ValueError(f'cpus: got {cpus}; a CPU budget is a positive number of CPUs')
        group = cls(hierarchy or find_hierarchy(), name, cpus)
        remove_orphans(group.hierarchy)
        for folder in group.folders:
            folder.mkdir()
        quota = max(1000, round(cpus * PERIOD_US))  # the kernel's smallest quota is 1 ms
        if group.hierarchy.version == 1:
            (group.path / 'cpu.cfs_period_us').write_text(str(PERIOD_US))
            (group.path / 'cpu.cfs_quota_us').write_text(str(quota))
        else:
            (group.path / 'cpu.max').write_text(f'{quota} {PERIOD_US}')
        return group

    @property
    def path(self) -> pathlib.Path:
        """The folder holding the quota."""
        return self.hierarchy.cpu_root / self.name

    @property
    def folders(self) -> list[pathlib.Path]:
        """Every folder of the group (v1 with `cpuacct` apart: one per hierarchy)."""
        extra = self.hierarchy.cpuacct_root
        return [self.path] + ([extra / self.name] if extra is not None else [])

    @property
    def procs_files(self) -> list[str]:
        """The `cgroup.procs` files a process joins the group through (all of them)."""
        return [str(folder / 'cgroup.procs') for folder in self.folders]

    def entering_command(self) -> list[str]:
        """A command prefix that moves its process into the group, then execs the arguments that
        follow in the same process: a program started under it runs inside the budget from its
        first instruction, children included."""
        joins = ' && '.join(f'echo $$ > {shlex.quote(procs)}' for procs in self.procs_files)
        return ['/bin/sh', '-c', f'{joins} && exec "$@"', 'enter-cgroup']

    def add(self, pid: int) -> None:
        """Moves process `pid` (all its threads) into the group."""
        for procs in self.procs_files:
            pathlib.Path(procs).write_text(str(pid))

    def pids(self) -> list[int]:
        return [int(pid) for pid in _read(self.path / 'cgroup.procs').split()]

    def stats(self) -> CpuStats:
        """The group's CPU time and throttling counters now."""
        fields = dict(line.split() for line in _read(self.path / 'cpu.stat').splitlines())
        if self.hierarchy.version == 2:
            usage_s = int(fields['usage_usec']) / 1e6
            throttled_s = int(fields['throttled_usec']) / 1e6
        else:
            usage_s = int(_read(self.folders[-1] / 'cpuacct.usage')) / 1e9
            throttled_s = int(fields['throttled_time']) / 1e9
        return CpuStats(
            usage_s=usage_s,
            periods=int(fields['nr_periods']),
            throttled_periods=int(fields['nr_throttled']),
            throttled_s=throttled_s,
        )

    def remove(self, timeout_s: float = 10.0) -> None:
        """Deletes the group. Processes still in it are moved to the parent group first, so that
        a host whose process lingers does not leave the group behind."""
        for folder in self.folders:
            if not folder.exists():
                continue
            for pid in _read(folder / 'cgroup.procs').split():
                with contextlib.suppress(OSError):  # it exited meanwhile
                    (folder.parent / 'cgroup.procs').write_text(pid)
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    folder.rmdir()
                    break
                except OSError:
                    # A process that just exited leaves the group when the kernel is done with it.
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
