"""A ParameterServerStrategy cluster of local processes in which each worker and parameter server
is an emulated host: a CPU budget of its own, an inbound link through Toxiproxy, and a process
that can be killed and started again on the same address.

    machines = dict(workers=[Machine(cpus=1.0), Machine(cpus=0.25)], ps=[Machine()])
    with EmulatedCluster(**machines) as cluster:
        cluster.host('worker', 1).link.latency(20, jitter_ms=5)
        strategy = tf.distribute.experimental.ParameterServerStrategy(cluster.resolver())
        ...
        cluster.host('worker', 1).kill()      # SIGKILL, as a lost machine
        cluster.host('worker', 1).restart()   # a new process on the same address

Every address in the cluster spec is a proxy's: whoever dials a task (the coordinator, a worker
reading a variable from a parameter server) crosses that task's link, so a toxic on it slows or
cuts every connection into the task. The servers bind ports of their own behind the proxies
(`servers.start_server_process(port=...)`), started by the Trainer's own launcher. The
coordinator is the calling process, outside any budget.
"""

from __future__ import annotations

import dataclasses
import signal
import subprocess
import uuid

from asynctrain.components.shared import ports as ports_lib
from asynctrain.components.trainer.cluster import servers
from asynctrain.testing.emulated_cluster import cpu_budget, toxiproxy


@dataclasses.dataclass(frozen=True)
class Machine:
    """What one emulated host is given.

    Attributes:
      cpus: its CPU budget in CPUs (0.5: half of one CPU's time); None: no budget.
    """

    cpus: float | None = None


@dataclasses.dataclass
class Host:
    """One worker or parameter server of an `EmulatedCluster`.

    Attributes:
      task_type: `worker` or `ps`.
      index: its task index.
      link: its inbound link (the proxy whose address the cluster spec holds).
      bind_port: the port its server binds, behind the proxy.
      cgroup: its CPU budget's group; None when it has none.
      cluster_spec: the cluster as it sees it (every address a proxy's).
      server_threads: its server's inter-op threads (0: the launcher's default).
      process: its server process now (a new one after `restart`).
    """

    task_type: str
    index: int
    link: toxiproxy.Link
    bind_port: int
    cgroup: cpu_budget.CpuCgroup | None
    cluster_spec: dict = dataclasses.field(repr=False)
    server_threads: int = 0
    process: subprocess.Popen | None = None

    @property
    def task(self) -> tuple[str, int]:
        return self.task_type, self.index

    @property
    def address(self) -> str:
        """The address the cluster dials it at (its link's)."""
        return self.link.listen

    def start(self, timeout_s: float = 60.0) -> None:
        """Starts its server process and returns once the server listens."""
        self.launch()
        self.wait_listening(timeout_s)

    def launch(self) -> None:
        """Starts its server process (in its budget, binding its port behind its link)."""
        self.process = servers.start_server_process(
            self.cluster_spec,
            self.task_type,
            self.index,
            self.server_threads,
            port=self.bind_port,
            prefix=self.cgroup.entering_command() if self.cgroup else (),
        )

    def wait_listening(self, timeout_s: float) -> None:
        """Returns once its server listens; raises if its process exits first."""
        # Its own port, not the proxy's: a proxy accepts connections with no server behind it.
        behind_proxy = {self.task_type: [f'{ports_lib.HOST}:{self.bind_port}']}
        servers.wait_for_servers(behind_proxy, {(self.task_type, 0): self.process}, timeout_s)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILLs its process, as a machine lost at once, and reaps it."""
        if self.alive():
            self.process.send_signal(signal.SIGKILL)
        if self.process is not None:
            self.process.wait()

    def restart(self, timeout_s: float = 60.0) -> None:
        """Kills its process if it still runs, then starts a new one on the same address (same
        port, same budget, same link)."""
        self.kill()
        self.start(timeout_s)

    def stop(self) -> None:
        if self.process is not None:
            servers.stop_processes({self.task: self.process})

    def cpu_stats(self) -> cpu_budget.CpuStats | None:
        """Its group's CPU counters, summed over every process it has run; None without a
        budget."""
        return self.cgroup.stats() if self.cgroup is not None else None


class EmulatedCluster:
    """Workers and parameter servers as emulated hosts, on 127.0.0.1; everything stopped, every
    group and proxy removed, on exit.

    Args:
      workers: one `Machine` per worker.
      ps: one `Machine` per parameter server.
      server_threads: the servers' inter-op threads (0: the launcher's default).
      startup_timeout_s: how long a server may take to listen.
    """

    def __init__(
        self,
        workers: list[Machine],
        ps: list[Machine],
        server_threads: int = 0,
        startup_timeout_s: float = 60.0,
    ):
        self._machines = {servers.WORKER: list(workers), servers.PS: list(ps)}
        self._server_threads = server_threads
        self._startup_timeout_s = startup_timeout_s
        self._proxies = toxiproxy.ToxiproxyServer()
        self.hosts: dict[tuple[str, int], Host] = {}

    @property
    def cluster_spec(self) -> dict:
        """The cluster as every replica and the coordinator see it: the proxies' addresses."""
        return {
            job: [self.hosts[(job, i)].address for i in range(len(machines))]
            for job, machines in self._machines.items()
        }

    def host(self, task_type: str, index: int) -> Host:
        return self.hosts[(task_type, index)]

    def resolver(self):
        """A `SimpleClusterResolver` of the proxied cluster, for `ParameterServerStrategy`."""
        return servers.attach(self.cluster_spec).resolver

    def __enter__(self) -> EmulatedCluster:
        self._proxies.__enter__()
        try:
            self._make_hosts()
            for host in self.hosts.values():
                host.launch()  # all at once: each spends seconds importing TensorFlow
            for host in self.hosts.values():
                host.wait_listening(self._startup_timeout_s)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _make_hosts(self) -> None:
        tasks = [(job, i, m) for job, ms in self._machines.items() for i, m in enumerate(ms)]
        # The servers' ports and the proxies' in one pick, all distinct: a proxy made with a port
        # picked apart could take a server's, free until that server binds it seconds later.
        picked = ports_lib.free_ports(2 * len(tasks))
        bind_ports, listen_ports = picked[: len(tasks)], picked[len(tasks) :]
        hierarchy = None
        if any(machine.cpus is not None for _, _, machine in tasks):
            hierarchy = cpu_budget.find_hierarchy()
        links = {
            (job, index): self._proxies.link(
                f'{job}-{index}', f'{ports_lib.HOST}:{port}', listen_port=listen
            )
            for (job, index, _), port, listen in zip(tasks, bind_ports, listen_ports)
        }
        spec = {
            job: [links[(job, i)].listen for i in range(len(ms))]
            for job, ms in self._machines.items()
        }
        run = uuid.uuid4().hex[:8]  # two clusters of one process apart
        for (job, index, machine), port in zip(tasks, bind_ports):
            cgroup = None
            if machine.cpus is not None:
                name = cpu_budget.group_name(f'{run}-{job}-{index}')
                cgroup = cpu_budget.CpuCgroup.create(name, machine.cpus, hierarchy)
            self.hosts[(job, index)] = Host(
                job, index, links[(job, index)], port, cgroup, spec, self._server_threads
            )

    def __exit__(self, *exc_info) -> None:
        try:
            for host in self.hosts.values():
                host.stop()
            for host in self.hosts.values():
                if host.cgroup is not None:
                    host.cgroup.remove()
        finally:
            self._proxies.__exit__(None, None, None)
