"""Emulated network links: Toxiproxy, a TCP proxy whose links take latency, a bandwidth cap or a
cut, configured through its HTTP API.

Where the kernel has no `netem` queueing discipline (containers, most CI machines), a proxy in
front of each server is how a link gets worse: a replica's address in the cluster spec is the
proxy's, the server listens on a port of its own behind it. `server_binary` builds Shopify's
`toxiproxy-server` from its Go module with `go install` (Go on PATH) into
`~/.cache/asynctrain/toxiproxy/<version>/` on first use and reuses it after; `ToxiproxyServer`
runs it on a free loopback port. Toxics act on one direction of a link's bytes: `downstream`
(server to client, Toxiproxy's default) or `upstream` (client to server).
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import pathlib
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request

from asynctrain.components.shared import ports as ports_lib
from asynctrain.components.trainer.cluster import servers
from asynctrain.testing.emulated_cluster import socket_bytes

VERSION = 'v2.5.0'
MODULE = 'github.com/Shopify/toxiproxy/v2/cmd/server'
CACHE_ROOT = pathlib.Path.home() / '.cache' / 'asynctrain' / 'toxiproxy'
HOST = ports_lib.HOST
DOWNSTREAM, UPSTREAM = 'downstream', 'upstream'


def server_binary(version: str = VERSION, cache_root: pathlib.Path = CACHE_ROOT) -> pathlib.Path:
    """`toxiproxy-server` of `version`, built by `go install` into the cache on first use.

    Concurrent callers (pytest-xdist workers) wait on a file lock; only one builds.

    Raises:
      RuntimeError: `go` is not on PATH, or the build failed (the message holds go's output).
    """
    folder = cache_root / version
    binary = folder / 'server'  # `go install` names it after the package's folder
    if binary.is_file():
        return binary
    if shutil.which('go') is None:
        raise RuntimeError(
            f'Emulated links need toxiproxy-server {version}, built from {MODULE} by `go '
            f'install`; `go` (1.17 or newer, as its go.mod asks) is not on PATH. Install Go, or put a built server '
            f'at {binary}'
        )
    cache_root.mkdir(parents=True, exist_ok=True)
    with open(cache_root / f'{version}.lock', 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if binary.is_file():
            return binary
        staging = folder.with_name(folder.name + '.partial')
        shutil.rmtree(staging, ignore_errors=True)
        print(f'toxiproxy: go install {MODULE}@{version} into {folder}', flush=True)
        start = time.monotonic()
        result = subprocess.run(
            ['go', 'install', f'{MODULE}@{version}'],
            env={**os.environ, 'GOBIN': str(staging)},
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(
                f'go install {MODULE}@{version} failed (exit {result.returncode}):\n'
                f'{result.stdout[-4000:]}{result.stderr[-4000:]}'
            )
        staging.rename(folder)
        print(f'toxiproxy: built in {time.monotonic() - start:.1f} s', flush=True)
    return binary


class ApiError(RuntimeError):
    """Toxiproxy answered a request with an error status."""


@dataclasses.dataclass(frozen=True)
class Api:
    """Toxiproxy's HTTP API at `url` (`http://127.0.0.1:<port>`)."""

    url: str

    def request(self, method: str, path: str, body: dict | None = None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={'Content-Type': 'application/json'}
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as error:
            raise ApiError(f'{method} {path}: {error.code} {error.read().decode()}') from None
        return json.loads(text) if text.strip().startswith(('{', '[')) else text

    def version(self) -> str:
        return self.request('GET', '/version')

    def metrics(self) -> str:
        """The Prometheus text of the server's metrics (bytes through each proxy)."""
        with urllib.request.urlopen(self.url + '/metrics', timeout=10) as response:
            return response.read().decode()


@dataclasses.dataclass(frozen=True)
class Link:
    """One proxy: clients connect to `listen`, which forwards to `upstream`.

    Attributes:
      api: the server's API.
      name: the proxy's name.
      listen: the address clients use, `127.0.0.1:<port>`.
      upstream: the address of the server behind it.
    """

    api: Api
    name: str
    listen: str
    upstream: str

    def add_toxic(
        self, kind: str, attributes: dict, stream: str = DOWNSTREAM, name: str | None = None
    ) -> str:
        """Adds a toxic of Toxiproxy's type `kind` (latency, bandwidth, timeout, slicer, ...);
        returns its name (by default `<kind>_<stream>`)."""
        name = name or f'{kind}_{stream}'
        body = {'name': name, 'type': kind, 'stream': stream, 'toxicity': 1.0}
        self.api.request('POST', f'/proxies/{self.name}/toxics', {**body, 'attributes': attributes})
        return name

    def remove_toxic(self, name: str) -> None:
        self.api.request('DELETE', f'/proxies/{self.name}/toxics/{name}')

    def toxics(self) -> list[dict]:
        return self.api.request('GET', f'/proxies/{self.name}/toxics')

    def clear(self) -> None:
        """Removes every toxic: the link is as good as loopback again."""
        for toxic in self.toxics():
            self.remove_toxic(toxic['name'])

    def latency(self, ms: float, jitter_ms: float = 0, stream: str = DOWNSTREAM) -> str:
        """Delays every chunk of bytes in `stream` by `ms` plus or minus up to `jitter_ms`."""
        return self.add_toxic('latency', {'latency': round(ms), 'jitter': round(jitter_ms)}, stream)

    def bandwidth(self, kb_per_s: int, stream: str = DOWNSTREAM) -> str:
        """Caps `stream` at `kb_per_s` kilobytes a second."""
        return self.add_toxic('bandwidth', {'rate': int(kb_per_s)}, stream)

    def blackhole(self, stream: str = UPSTREAM) -> str:
        """Drops every byte of `stream`, connections left open (a partition that looks like
        silence, not refusal), until the toxic is removed."""
        return self.add_toxic('timeout', {'timeout': 0}, stream, name=f'blackhole_{stream}')

    def set_enabled(self, enabled: bool) -> None:
        """Disabled, the proxy closes its connections and refuses new ones (a cut link)."""
        self.api.request('POST', f'/proxies/{self.name}', {'enabled': enabled})

    def cut(self) -> None:
        self.set_enabled(False)

    def restore(self) -> None:
        self.set_enabled(True)

    def cut_for(self, seconds: float) -> threading.Timer:
        """Cuts the link now and restores it after `seconds` (on a timer thread, returned:
        `join` it to wait for the link to be back)."""
        self.cut()
        timer = threading.Timer(seconds, self.restore)
        timer.daemon = True
        timer.start()
        return timer

    def remove(self) -> None:
        """Deletes the proxy: its connections close, its port is free again."""
        self.api.request('DELETE', f'/proxies/{self.name}')

    def enabled(self) -> bool:
        return bool(self.api.request('GET', f'/proxies/{self.name}')['enabled'])

    def bytes_received(self) -> dict[str, int]:
        """Bytes the proxy has received, by direction (`upstream`: from clients, `downstream`:
        from the server), from the server's metrics; 0 for a direction no byte has crossed."""
        received = {UPSTREAM: 0, DOWNSTREAM: 0}
        for line in self.api.metrics().splitlines():
            if line.startswith('toxiproxy_proxy_received_bytes_total{') and (
                f'proxy="{self.name}"' in line
            ):
                labels, value = line.rsplit(' ', 1)
                direction = labels.split('direction="', 1)[1].split('"', 1)[0]
                received[direction] = int(float(value))
        return received

    def bytes_through(self) -> dict[str, int]:
        """Bytes that crossed the link so far, by direction, open connections included: the
        proxy's metrics for connections already closed (`bytes_received`) plus the kernel's
        counters of the connections still open on the link's port (`socket_bytes`: `upstream`
        what the clients sent, `downstream` what they were sent)."""
        closed = self.bytes_received()
        live = socket_bytes.port_totals(int(self.listen.rsplit(':', 1)[1]))
        return {
            UPSTREAM: closed[UPSTREAM] + live['received'],
            DOWNSTREAM: closed[DOWNSTREAM] + live['sent'],
        }


class ToxiproxyServer:
    """`toxiproxy-server` on a free 127.0.0.1 port, stopped on exit.

        with ToxiproxyServer() as proxies:
            link = proxies.link('ps-0', upstream='127.0.0.1:23456')
            link.latency(20, jitter_ms=5)
            ...  # clients dial link.listen

    Its API serves Prometheus metrics (`Api.metrics`: bytes received and sent per proxy).
    """

    def __init__(self, binary: pathlib.Path | None = None, startup_timeout_s: float = 30.0):
        self._binary = binary
        self._startup_timeout_s = startup_timeout_s
        self._process: subprocess.Popen | None = None
        self.api: Api | None = None

    def __enter__(self) -> ToxiproxyServer:
        binary = self._binary or server_binary()
        port = ports_lib.free_port()
        command = [str(binary), '-host', HOST, '-port', str(port), '-proxy-metrics']
        # Errors only: at its default level it logs every connection opened and closed.
        env = {**servers.child_env(), 'LOG_LEVEL': 'error'}
        self._process = servers.spawn_program(command, env)
        self.api = Api(f'http://{HOST}:{port}')
        try:
            self._wait_ready()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self._startup_timeout_s
        while True:
            if self._process.poll() is not None:
                raise RuntimeError(
                    f'toxiproxy-server exited with code {self._process.returncode} (its '
                    'output is above)'
                )
            try:
                self.api.version()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f'toxiproxy-server not answering at {self.api.url} after '
                        f'{self._startup_timeout_s} s'
                    ) from None
                time.sleep(0.1)

    def __exit__(self, *exc_info) -> None:
        if self._process is not None:
            servers.stop_processes({'toxiproxy-server': self._process})
        self._process = None

    def link(self, name: str, upstream: str, listen_port: int | None = None) -> Link:
        """A new proxy `name` to `upstream`, listening on `listen_port` (by default a free one
        outside the ephemeral range)."""
        listen = f'{HOST}:{listen_port or ports_lib.free_port()}'
        self.api.request('POST', '/proxies', {'name': name, 'listen': listen, 'upstream': upstream})
        return Link(self.api, name, listen, upstream)
