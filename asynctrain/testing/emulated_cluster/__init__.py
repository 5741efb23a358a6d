"""An emulated cluster of unequal hosts on one machine: each worker or parameter server a process
with a CPU budget of its own (a cgroup's quota), reached through a link that can be slowed or cut
(Toxiproxy), and killed and started again on the same address.

- `cpu_budget`: a cgroup (v1 `cpu` controller or v2 `cpu.max`) with its quota and counters;
- `toxiproxy`: Toxiproxy's server, built from its Go module into `~/.cache/asynctrain`, and its
  links (latency with jitter, bandwidth, a cut, a black hole);
- `hosts`: `EmulatedCluster`, the two together around the Trainer's own server processes.

Benches compare training under unequal hosts with it; tests check each piece by its counters, not
by timings (docs/benchmarks.md, "Emulated hosts").
"""
