"""`make bench-clients`: what recording costs. Our history-writing producers against the bare
client libraries making the same sends (same settings, same bodies, every acknowledgement
counted) on the same real cluster: a Kafka cluster (KRaft, three brokers, acks=all, RF=3) and a
RabbitMQ cluster (a quorum queue, publisher confirms). Each client runs unthrottled in a
process of its own, alternately, ROUNDS times after a warm-up; the figures are medians of messages
acknowledged per second and CPU seconds per 10k messages (the client process's, librdkafka's
threads included). Figures, not assertions.

BENCH_MESSAGES (default 100k) per client per round; BENCH_ROUNDS (default 3).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from contract.history import HistoryWriter, encode_body
from contract.numbers import parse_count

ROOT = Path(__file__).resolve().parent.parent
CLIENT_TIMEOUT = 600.0  # seconds one client's round may take
TOPIC, EXCHANGE, QUEUE = "bench", "bench", "bench.q"


@dataclass(frozen=True)
class Figures:
    acked: int
    seconds: float
    cpu_seconds: float

    @property
    def rate(self) -> float:
        return self.acked / self.seconds if self.seconds else 0.0


# ---- one client, in its own process -------------------------------------------------------


def _timed(send_all: Callable[[], int | None]) -> Figures:
    """The round's wall and CPU time; `send_all` returns the acknowledgements it counted."""
    wall, cpu = time.perf_counter(), time.process_time()
    acked = send_all() or 0
    return Figures(acked, time.perf_counter() - wall, time.process_time() - cpu)


def _timed_ours(send_all: Callable[[], None], history_dir: Path) -> Figures:
    """Our client's round; its acknowledgements are counted from its history afterwards,
    outside the timing."""
    timed = _timed(send_all)
    history = (history_dir / "P1.jsonl").read_text().splitlines()
    return replace(timed, acked=sum(1 for line in history if '"type":"ok"' in line))


def _kafka(kind: str, target: dict[str, Any], count: int, history_dir: Path) -> Figures:
    from confluent_kafka import KafkaError, Message, Producer

    from workloads.kafka.base import ProducerConfig, producer_settings
    from workloads.kafka.clients import run_producer

    cfg = ProducerConfig(process="P1", topic=TOPIC, count=count, deadline=time.time() + 300)
    bootstrap = target["bootstrap_servers"]
    if kind == "ours":

        def ours() -> None:
            with HistoryWriter(history_dir, cfg.process, "kafka") as history:
                run_producer(cfg, bootstrap, history)

        return _timed_ours(ours, history_dir)

    def bare() -> int:
        producer = Producer(producer_settings(cfg, bootstrap))
        acked = 0

        def delivered(err: KafkaError | None, _msg: Message) -> None:
            nonlocal acked
            acked += err is None

        for seq in range(1, count + 1):
            while True:
                try:
                    producer.produce(TOPIC, value=encode_body("P1", seq), on_delivery=delivered)
                    break
                except BufferError:
                    producer.poll(0.1)
            producer.poll(0)
        producer.flush(300)
        return acked

    return _timed(bare)


def _rabbitmq(kind: str, target: dict[str, Any], count: int, history_dir: Path) -> Figures:
    from contract.topology import Endpoint
    from workloads.rabbitmq.clients import Publisher, PublisherConfig

    cfg = PublisherConfig(
        process="P1",
        history_dir=str(history_dir),
        endpoints=[Endpoint(**e) for e in target["endpoints"]],
        exchange=EXCHANGE,
        count=count,
        deadline=time.time() + 300,
        in_flight=target["in_flight"],
    )
    if kind == "ours":

        def ours() -> None:
            with HistoryWriter(history_dir, cfg.process, "rabbitmq") as history:
                Publisher(cfg, history).run()

        return _timed_ours(ours, history_dir)
    return _timed(lambda: _bare_pika(cfg))


def _bare_pika(cfg: Any) -> int:
    """pika alone: persistent, mandatory publishes with confirms, `in_flight` unconfirmed at
    most, on one connection to the first node."""
    import pika
    from pika.adapters.select_connection import SelectConnection

    from workloads.rabbitmq.topology import params

    state = {"next": 1, "tag": 0, "confirmed": 0, "acked": 0}
    channel: Any = None
    properties = pika.BasicProperties(delivery_mode=2, headers={"producer": "P1"})

    def pump() -> None:
        while state["next"] <= cfg.count and state["tag"] - state["confirmed"] < cfg.in_flight:
            body = encode_body("P1", state["next"])
            channel.basic_publish(cfg.exchange, "", body, properties, mandatory=True)
            state["next"] += 1
            state["tag"] += 1

    def on_confirm(frame: Any) -> None:
        tag = frame.method.delivery_tag
        done = tag - state["confirmed"] if frame.method.multiple else 1
        state["confirmed"] += done
        state["acked"] += done if isinstance(frame.method, pika.spec.Basic.Ack) else 0
        if state["confirmed"] >= cfg.count:
            conn.close()
        else:
            pump()

    def on_channel(ch: Any) -> None:
        nonlocal channel
        channel = ch
        ch.confirm_delivery(ack_nack_callback=on_confirm, callback=lambda _f: pump())

    conn = SelectConnection(
        params(cfg.endpoints[0]),
        on_open_callback=lambda c: c.channel(on_open_callback=on_channel),
        on_close_callback=lambda c, _r: c.ioloop.stop(),
    )
    conn.ioloop.call_later(300, conn.ioloop.stop)
    conn.ioloop.start()
    return state["acked"]


SYSTEMS = {"kafka": _kafka, "rabbitmq": _rabbitmq}


def one_client(system: str, kind: str, target_json: str, count: int) -> Figures:
    with tempfile.TemporaryDirectory(prefix="brokerjepsen-bench-clients-") as tmp:
        return SYSTEMS[system](kind, json.loads(target_json), count, Path(tmp))


# ---- the bench ----------------------------------------------------------------------------


def _round(system: str, kind: str, target: dict[str, Any], count: int) -> Figures:
    argv = [sys.executable, "-m", "bench.clients", system, kind, json.dumps(target)]
    done = subprocess.run(
        [*argv, str(count)], cwd=ROOT, capture_output=True, text=True, timeout=CLIENT_TIMEOUT
    )
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"{system} {kind} client failed: {tail}")
    return Figures(**json.loads(done.stdout.strip().splitlines()[-1]))


@contextmanager
def kafka_cluster(workdir: Path) -> Iterator[dict[str, Any]]:
    from systems.kafka.admin import KafkaAdmin
    from systems.kafka.cluster import KafkaCluster
    from systems.kafka.config import KafkaClusterConfig

    cluster = KafkaCluster(
        KafkaClusterConfig(mode="kraft"), workdir / "kafka", f"bench-clients-{os.getpid()}"
    )
    admin = KafkaAdmin(cluster, TOPIC)
    try:
        cluster.up(300, lambda: admin.registered_brokers() >= set(cluster.node_of))
        admin.create_topic(1, 3, None, {"min.insync.replicas": "2"}, timeout=60)
        yield {"bootstrap_servers": cluster.bootstrap_servers}
    finally:
        cluster.down()


@contextmanager
def rabbitmq_cluster(workdir: Path) -> Iterator[dict[str, Any]]:
    import docker

    from systems.rabbitmq.cluster import ClusterConfig, RabbitMQCluster, choose_image
    from workloads.rabbitmq.topology import declare_topology

    image = choose_image(None, docker.from_env())
    cluster = RabbitMQCluster(
        ClusterConfig(partition_handling="pause_minority", image=image),
        workdir=workdir / "rabbitmq",
        project=f"bench-clients-rmq-{os.getpid()}",
    )
    try:
        cluster.up(300)
        endpoints = cluster.endpoints()
        declare_topology(endpoints, EXCHANGE, [QUEUE], "quorum")
        yield {"endpoints": [asdict(e) for e in endpoints]}
    finally:
        cluster.down()


def _row(name: str, figures: dict[str, list[Figures]]) -> str:
    rate = {k: statistics.median(f.rate for f in v) for k, v in figures.items()}
    cpu = {
        k: statistics.median(f.cpu_seconds / max(f.acked, 1) * 10_000 for f in v)
        for k, v in figures.items()
    }
    share = rate["ours"] / rate["bare"] if rate["bare"] else 0.0
    return (
        f"{name:<34} {rate['bare']:>10.0f} {rate['ours']:>10.0f} {share:>7.0%} "
        f"{cpu['bare']:>9.2f} {cpu['ours']:>9.2f}"
    )


def _measure(system: str, target: dict[str, Any], count: int, rounds: int) -> dict:
    figures: dict[str, list[Figures]] = {"bare": [], "ours": []}
    for kind in ("bare", "ours"):  # a warm-up, not counted: the first round meets a cold broker
        _round(system, kind, target, max(count // 10, 1))
    for _ in range(rounds):
        for kind in ("bare", "ours"):
            figures[kind].append(_round(system, kind, target, count))
    return figures


def main() -> int:
    try:
        count = parse_count(os.environ.get("BENCH_MESSAGES") or "100k")
        rounds = parse_count(os.environ.get("BENCH_ROUNDS") or "3")
    except ValueError as e:
        print(f"bench-clients: {e}", file=sys.stderr)
        return 2
    print(f"{os.cpu_count()} cores; {count} messages per client per round, {rounds} rounds")
    print(
        f"{'cluster, client settings':<34} {'bare msg/s':>10} {'ours msg/s':>10} {'share':>7} "
        f"{'bare cpu':>9} {'ours cpu':>9}   (cpu: seconds per 10k messages)"
    )
    with tempfile.TemporaryDirectory(prefix="brokerjepsen-bench-clients-") as tmp:
        try:
            with kafka_cluster(Path(tmp)) as target:
                figures = _measure("kafka", target, count, rounds)
                print(_row("kafka kraft, acks=all, RF=3", figures), flush=True)
            with rabbitmq_cluster(Path(tmp)) as target:
                # One confirm at a time (the scenarios' setting) waits on the round trip: fewer.
                for in_flight, n in ((100, count), (1, max(count // 20, 1))):
                    figures = _measure("rabbitmq", target | {"in_flight": in_flight}, n, rounds)
                    name = f"rabbitmq quorum, in_flight={in_flight}"
                    print(_row(name, figures), flush=True)
        except Exception as e:  # noqa: BLE001 - a bench's failure is one line, its cluster down
            print(f"bench-clients: {type(e).__name__}: {e}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 5:  # one client's round: python -m bench.clients SYS KIND T N
        _, system, kind, target, n = sys.argv
        print(json.dumps(asdict(one_client(system, kind, target, int(n)))))
        raise SystemExit(0)
    raise SystemExit(main())
