"""Toxiproxy on the clients' path: one TCP proxy per broker listener the clients use, on
127.0.0.1, whose toxics delay, hold or drop what crosses it, or whose connections it resets.

The kernel here has no `sch_netem`, so iptables can cut a link but not slow one; a userspace
proxy can, and only for the clients' traffic (the brokers' own traffic to each other stays
direct). Toxiproxy (Shopify's, the proxy made for this) is built once from the Go module proxy
with the machine's Go (`make setup`: `python -m compose.proxy --ensure`), started by a run that
uses a proxy op, and ends with the process that started it (its parent-death signal: a harness
killed with SIGKILL leaves no proxy behind).

Toxics as Toxiproxy names them: `latency` (latency and jitter in ms), `timeout` (timeout 0: the
data is dropped and the connection stays open until the toxic goes), `bandwidth` (KB/s). A
stream is `upstream` (client to broker) or `downstream` (broker to client).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import requests

from contract.cache import cache_root
from contract.process import dies_with

VERSION = "2.5.0"
MODULE = "github.com/Shopify/toxiproxy/v2/cmd/server"
BUILD_TIMEOUT_S = 600.0
START_TIMEOUT_S = 10.0
API_TIMEOUT_S = 5.0
# Removing a toxic that holds data flushes it first, each chunk waiting up to 5 s for a reader
# (Toxiproxy's own bound): a release can take a while, and is bounded here.
REMOVE_TIMEOUT_S = 120.0
# What Toxiproxy logs for a chunk it dropped at a toxic's removal, no reader having taken it in
# 5 s (a connection its client stopped reading): held data that was never delivered.
UNDELIVERED = b"Could not write last packets after interrupt"
UPSTREAM, DOWNSTREAM = "upstream", "downstream"
# A hold is a latency longer than any step (a scenario lasts an hour at most): removing the toxic
# delivers what it held at once and in order, even to a client that closed its connection.
HOLD_MS = 3_600_000


class ProxyError(Exception):
    """The proxy cannot be built, started or told something: one line saying why."""


def binary_path() -> Path:
    return cache_root() / "toxiproxy" / f"toxiproxy-server-{VERSION}"


def ensure_binary() -> Path:
    """The Toxiproxy server, built with the machine's Go the first time (a minute), then kept."""
    target = binary_path()
    if target.is_file() and os.access(target, os.X_OK):
        return target
    go = shutil.which("go") or (
        "/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None
    )
    if go is None:
        raise ProxyError(
            "no Go toolchain: Toxiproxy is built with `go install` (apt-get install golang-go)"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bj-toxiproxy-") as gobin:
        env = {**os.environ, "GOBIN": gobin, "GOFLAGS": "-mod=mod", "CGO_ENABLED": "0"}
        try:
            done = subprocess.run(
                [go, "install", f"{MODULE}@v{VERSION}"],
                capture_output=True,
                text=True,
                env=env,
                timeout=BUILD_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            raise ProxyError(
                f"building Toxiproxy {VERSION} took over {BUILD_TIMEOUT_S:.0f} s"
            ) from None
        built = Path(gobin) / "server"
        if done.returncode != 0 or not built.exists():
            last = (done.stderr or done.stdout).strip().splitlines()
            raise ProxyError(f"go install {MODULE}@v{VERSION} failed: {last[-1] if last else '?'}")
        shutil.move(str(built), target)
    return target


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Toxic:
    """A toxic as Toxiproxy takes it."""

    name: str
    type: str  # latency | timeout | bandwidth | reset_peer | slicer | limit_data
    stream: str = UPSTREAM
    attributes: dict[str, int] = field(default_factory=dict)
    toxicity: float = 1.0

    def body(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "stream": self.stream,
            "toxicity": self.toxicity,
            "attributes": self.attributes,
        }


def delay(name: str, latency_ms: int, jitter_ms: int = 0, stream: str = UPSTREAM) -> Toxic:
    return Toxic(name, "latency", stream, {"latency": latency_ms, "jitter": jitter_ms})


# A bandwidth no link here reaches, in KB/s: Toxiproxy reads a rate of 0 as a bug, not as none.
UNLIMITED_KB_S = 1_000_000_000


def released(toxic: Toxic) -> dict[str, int] | None:
    """The attributes that make a toxic do nothing while it keeps its place, or None for one
    whose removal loses nothing (a blackhole drops what it takes anyway). Toxiproxy flushes
    what a toxic holds when it is removed with a 5 s bound per chunk and drops what no reader
    takes in time (a broker applying backpressure, a client that gave up its connection): a
    released latency or bandwidth goes on passing what it held, in order, as fast as the other
    end reads it, and drops nothing."""
    if toxic.type == "latency":
        return {"latency": 0, "jitter": 0}
    if toxic.type == "bandwidth":
        return {"rate": UNLIMITED_KB_S}
    return None


def blackhole(name: str, stream: str = UPSTREAM) -> Toxic:
    """The data dropped, the connection kept open: the client learns nothing until its own
    timeouts. Toxiproxy closes the connections it held when the toxic goes."""
    return Toxic(name, "timeout", stream, {"timeout": 0})


def bandwidth(name: str, kb_per_s: int, stream: str = UPSTREAM) -> Toxic:
    return Toxic(name, "bandwidth", stream, {"rate": kb_per_s})


class ProxyServer:
    """A Toxiproxy server on 127.0.0.1, for one run: start(), proxies and toxics, stop()."""

    def __init__(self, log: Path | None = None) -> None:
        self.port = 0
        self.log = log
        self._process: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self.proxies: dict[str, str] = {}  # name -> the address it listens on

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        binary = ensure_binary()
        self.port = free_port()
        out: IO[bytes] | int = subprocess.DEVNULL
        if self.log is not None:
            self.log.parent.mkdir(parents=True, exist_ok=True)
            self._log_file = out = self.log.open("ab")
        self._process = subprocess.Popen(
            [str(binary), "-host", "127.0.0.1", "-port", str(self.port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=dies_with(os.getpid()),
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                self.stop()
                raise ProxyError(f"Toxiproxy exited at start (code {self._process.returncode})")
            try:
                requests.get(f"{self.api}/version", timeout=1.0).raise_for_status()
                return
            except requests.RequestException:
                time.sleep(0.1)
        self.stop()
        raise ProxyError(
            f"Toxiproxy did not answer on 127.0.0.1:{self.port} in {START_TIMEOUT_S:.0f} s"
        )

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=5)
        self._process = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def __enter__(self) -> ProxyServer:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def _call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        timeout: float = API_TIMEOUT_S,
        missing_ok: bool = False,
    ) -> Any:
        try:
            answer = requests.request(method, f"{self.api}{path}", json=body, timeout=timeout)
        except requests.RequestException as e:
            raise ProxyError(f"Toxiproxy {method} {path}: {e}") from None
        if missing_ok and answer.status_code == 404:
            return None
        if answer.status_code >= 300:
            raise ProxyError(
                f"Toxiproxy {method} {path}: {answer.status_code} {answer.text.strip()[:200]}"
            )
        return answer.json() if answer.content else None

    def create(self, name: str, upstream: str, listen_port: int = 0) -> str:
        """A proxy to `upstream` (host:port); returns the 127.0.0.1 address it listens on."""
        body = {
            "name": name,
            "listen": f"127.0.0.1:{listen_port}",
            "upstream": upstream,
            "enabled": True,
        }
        created = self._call("POST", "/proxies", body)
        self.proxies[name] = str(created["listen"])
        return self.proxies[name]

    def add(self, proxy: str, toxic: Toxic) -> None:
        self._call("POST", f"/proxies/{proxy}/toxics", toxic.body())

    def remove(self, proxy: str, toxic: str) -> None:
        """The toxic removed (what it held delivered first); one already gone is removed."""
        path = f"/proxies/{proxy}/toxics/{toxic}"
        self._call("DELETE", path, timeout=REMOVE_TIMEOUT_S, missing_ok=True)

    def update(self, proxy: str, toxic: str, attributes: dict[str, int]) -> None:
        """New attributes for a toxic in place: what it holds goes on through it, nothing is
        dropped (the call returns once the chunk it was holding has moved on)."""
        body = {"attributes": attributes}
        self._call("POST", f"/proxies/{proxy}/toxics/{toxic}", body, timeout=REMOVE_TIMEOUT_S)

    def undelivered(self) -> int:
        """How many held chunks Toxiproxy has dropped at a removal so far (from its log; 0
        without one)."""
        if self.log is None or not self.log.exists():
            return 0
        return self.log.read_bytes().count(UNDELIVERED)

    def toxics(self, proxy: str) -> list[dict[str, Any]]:
        return list(self._call("GET", f"/proxies/{proxy}/toxics") or [])

    def reset_connections(self, proxy: str) -> None:
        """Every connection through the proxy closed (disabled, then enabled again): the clients
        reconnect."""
        self._call("POST", f"/proxies/{proxy}", {"enabled": False})
        self._call("POST", f"/proxies/{proxy}", {"enabled": True})

    def heal(self) -> None:
        """Every toxic removed and every proxy enabled."""
        self._call("POST", "/reset")


def main(argv: list[str]) -> int:
    if argv != ["--ensure"]:
        print("usage: python -m compose.proxy --ensure", file=sys.stderr)
        return 2
    try:
        print(f"toxiproxy: {ensure_binary()}")
    except ProxyError as e:
        print(f"toxiproxy: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
