"""Toxiproxy on the clients' path, seen from a client: a delayed request arrives late, a
blackholed one never while the connection stays open, reset connections close, healed traffic
flows again, and the proxy ends with the process that started it. Loopback only: a TCP echo
server on 127.0.0.1 stands for the broker."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from compose.proxy import HOLD_MS, ProxyServer, blackhole, delay, released
from contract.process import alive
from contract.wait import wait_until
from tests.helpers import ROOT


@pytest.fixture
def echo() -> Iterator[str]:
    """A TCP echo server on 127.0.0.1 (each connection served until it closes)."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(4096):
                conn.sendall(data)

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join(timeout=2)
    server.close()


@pytest.fixture
def proxy() -> Iterator[ProxyServer]:
    with ProxyServer() as server:
        yield server


def connect(address: str) -> socket.socket:
    host, port = address.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=5)


def round_trip(conn: socket.socket, timeout: float = 5.0) -> float:
    conn.settimeout(timeout)
    started = time.monotonic()
    conn.sendall(b"ping")
    assert conn.recv(4) == b"ping"
    return time.monotonic() - started


def test_a_delayed_request_arrives_late_and_on_time_once_healed(
    echo: str, proxy: ProxyServer
) -> None:
    listen = proxy.create("kafka1", echo)
    with connect(listen) as conn:
        round_trip(conn)
        proxy.add("kafka1", delay("held", 800))
        assert round_trip(conn) >= 0.8
        proxy.heal()
        assert proxy.toxics("kafka1") == []
        assert round_trip(conn) < 0.8


def test_a_hold_delivers_in_order_at_its_removal_even_what_a_closed_client_sent(
    proxy: ProxyServer,
) -> None:
    """What a hold holds reaches the server only when the toxic goes, in the order it was sent,
    including what a client sent before it gave up and closed: the late request."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(10)
    received: list[tuple[float, bytes]] = []

    def record() -> None:
        for _ in range(2):
            conn, _ = server.accept()
            with conn:
                while data := conn.recv(4096):
                    received.append((time.monotonic(), data))

    recorder = threading.Thread(target=record, daemon=True)
    recorder.start()
    listen = proxy.create("kafka1", f"127.0.0.1:{server.getsockname()[1]}")
    proxy.add("kafka1", delay("hold", HOLD_MS))
    with connect(listen) as conn:
        conn.sendall(b"one,")
        time.sleep(0.2)
        conn.sendall(b"two")
    with connect(listen) as gone:  # gives up at once
        gone.sendall(b"zombie")
    time.sleep(1.0)
    assert received == []
    released = time.monotonic()
    proxy.remove("kafka1", "hold")
    recorder.join(timeout=10)
    server.close()
    data = sorted(received)
    assert b"".join(d for _, d in data if d != b"zombie") == b"one,two"
    assert b"zombie" in [d for _, d in data]
    assert all(t >= released for t, _ in data)


def test_a_blackhole_drops_the_data_and_keeps_the_connection_until_healed(
    echo: str, proxy: ProxyServer
) -> None:
    listen = proxy.create("kafka1", echo)
    with connect(listen) as conn:
        proxy.add("kafka1", blackhole("hole"))
        conn.settimeout(1.0)
        conn.sendall(b"lost")
        with pytest.raises(TimeoutError):
            conn.recv(4)
        proxy.remove("kafka1", "hole")
        # Toxiproxy closes the connections a timeout toxic held when it goes: the client
        # reconnects, as after a broker that stopped answering.
        conn.settimeout(5)
        assert conn.recv(4) == b""
    with connect(listen) as again:
        assert round_trip(again) < 1.0


def test_resetting_connections_closes_the_clients_and_lets_them_back(
    echo: str, proxy: ProxyServer
) -> None:
    listen = proxy.create("kafka1", echo)
    with connect(listen) as conn:
        round_trip(conn)
        proxy.reset_connections("kafka1")
        conn.settimeout(5)
        try:
            closed = conn.recv(4) == b""
        except ConnectionResetError:
            closed = True
        assert closed
    with connect(listen) as again:
        round_trip(again)


def test_the_proxy_ends_with_the_process_that_started_it(tmp_path: object) -> None:
    """A harness killed with SIGKILL runs no cleanup: its proxy must still go."""
    starter = (
        "import json, time\n"
        "from compose.proxy import ProxyServer\n"
        "p = ProxyServer(); p.start()\n"
        "print(json.dumps({'pid': p.pid}), flush=True)\n"
        "time.sleep(60)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", starter], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    proxy_pid = json.loads(child.stdout.readline())["pid"]
    assert alive(proxy_pid)
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=10)
    assert wait_until(lambda: not alive(proxy_pid), 10), "the proxy outlived its starter"


def test_removing_a_toxic_already_gone_is_no_error(echo: str, proxy: ProxyServer) -> None:
    proxy.create("kafka1", echo)
    proxy.add("kafka1", delay("held", 100))
    proxy.remove("kafka1", "held")
    proxy.remove("kafka1", "held")  # a retried heal: the toxic is gone, as asked
    assert proxy.toxics("kafka1") == [] and proxy.undelivered() == 0


def test_a_hold_released_in_place_drops_nothing_a_slow_reader_takes_late(
    proxy: ProxyServer,
) -> None:
    """Removing a toxic drops what no reader takes within 5 s; released in place (latency 0),
    the held data waits for a reader that comes back only after 7 s, all of it, in order."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(30)
    got = bytearray()
    size = 8 * 1024 * 1024  # far past what the sockets buffer between them

    def read_late() -> None:
        conn, _ = server.accept()
        with conn:
            time.sleep(7.0)
            while len(got) < size and (data := conn.recv(1 << 16)):
                got.extend(data)

    reader = threading.Thread(target=read_late, daemon=True)
    reader.start()
    listen = proxy.create("kafka1", f"127.0.0.1:{server.getsockname()[1]}")
    held = delay("hold", HOLD_MS)
    proxy.add("kafka1", held)
    payload = bytes(i % 251 for i in range(size))
    with connect(listen) as conn:
        sender = threading.Thread(target=conn.sendall, args=(payload,), daemon=True)
        sender.start()
        time.sleep(1.0)
        attributes = released(held)
        assert attributes is not None
        proxy.update("kafka1", "hold", attributes)
        reader.join(timeout=60)
        sender.join(timeout=10)
    server.close()
    assert len(got) == size and bytes(got) == payload
    assert proxy.undelivered() == 0
