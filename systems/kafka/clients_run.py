"""What every Kafka run shares, mock tier or real cluster: the clients and the drain."""

from __future__ import annotations

import signal
import time
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from contract.history import last_seq_sent
from nemesis.containers import NemesisError
from systems.kafka.config import version_tuple
from systems.kafka.workload_spec import FINAL_READER, KafkaShareSpec, output_topic
from systems.run import ScenarioRun
from systems.scenario import ScenarioError
from workloads.kafka.base import ProducerConfig, producer_settings
from workloads.kafka.clients import ReaderConfig, reader_settings
from workloads.kafka.copier import (
    JAVA_CONSUMER_PREFIX,
    JAVA_PRODUCER_PREFIX,
    CopierConfig,
    copier_consumer_settings,
    copier_java_properties,
    copier_producer_settings,
)
from workloads.kafka.properties import to_property
from workloads.kafka.share import ShareConfig, share_java_properties, share_settings
from workloads.kafka.transactions import (
    TransactionConfig,
    java_properties,
    transactional_settings,
)


class KafkaClientsRun(ScenarioRun):
    """A run whose clients are workloads.kafka.clients producers and readers."""

    client_module = "workloads.kafka.clients"
    read_deadline = 0.0  # Unix time: the readers' and copiers' (set as they start)
    write_deadline = 0.0  # Unix time: the producers' (set as they start)

    @property
    def bootstrap_servers(self) -> str:
        raise NotImplementedError

    def kafka_release(self) -> str:
        """The cluster's Kafka release (4.4.0): the Java client's kafka-clients is the same. On
        a run that upgrades the cluster, the newest release it moves to: as in Kafka's own
        upgrade tests, the new release's clients meet the old brokers, then the new."""
        images = self.manifest.images or {}
        version = images.get("kafka", {}).get("version")
        if not version:
            raise ScenarioError("the java client needs the cluster's Kafka release, unknown here")
        upgrades = [str(v["image_version"]) for k, v in images.items() if k.startswith("kafka@")]
        return max([str(version), *upgrades], key=version_tuple)

    def groups(self) -> list[str]:
        final = [FINAL_READER] if self.scenario.workload.final_read else []
        return [r.id for r in self.scenario.workload.readers] + final

    def _client_config(self, deadline: float, **settings: object) -> dict[str, object]:
        """What a producer or reader process is told: where the cluster is, and until when."""
        return {
            "bootstrap_servers": self.bootstrap_servers,
            "topic": self.scenario.cluster.topic,
            "deadline": deadline,
            **settings,
        }

    def topic_of_reader(self, side: str) -> str:
        """The topic a reader reads: the workload's, or the exactly-once copy's output."""
        topic = self.scenario.cluster.topic
        return output_topic(topic) if side == "output" else topic

    def topics(self) -> list[str]:
        """Every topic the workload writes: its own, and the copy's output when it copies."""
        topic = self.scenario.cluster.topic
        return [topic, output_topic(topic)] if self.scenario.workload.copiers else [topic]

    def _copier_config(self, deadline: float, spec: Any) -> CopierConfig:
        topic = self.scenario.cluster.topic
        knobs = spec.model_dump(exclude={"id"})
        knobs["delivery_timeout_ms"] = spec.effective_delivery_timeout_ms()
        return CopierConfig(spec.id, topic, output_topic(topic), deadline=deadline, **knobs)

    def client_settings(self) -> dict[str, dict[str, str]]:
        """Each producer's and reader's configuration as the client is given it (where the
        cluster is and the client's log level left out: they are the harness's)."""
        w, topic = self.scenario.workload, self.scenario.cluster.topic
        out: dict[str, dict[str, str]] = {}
        for p in w.producers:
            knobs = p.model_dump(exclude={"id", "transaction", "start_at"})
            cfg = ProducerConfig(p.id, topic, deadline=0, **knobs)
            if p.transaction is None:
                out[f"producer {p.id}"] = _shown(producer_settings(cfg, ""))
            elif p.transaction.client == "java":
                txn = TransactionConfig(**p.transaction.model_dump())
                out[f"producer {p.id}"] = _shown(java_properties(cfg, txn, ""))
            else:
                txn = TransactionConfig(**p.transaction.model_dump())
                out[f"producer {p.id}"] = _shown(transactional_settings(cfg, txn, ""))
        for r in w.readers:
            rcfg = ReaderConfig(
                r.id,
                topic,
                r.id,
                0,
                r.mode,
                r.commit_every,
                r.group_protocol,
                isolation=r.isolation,
                config=r.config,
            )
            out[f"reader {r.id}"] = _shown(reader_settings(rcfg, ""))
        if w.share_consumers is not None:
            out |= self._share_settings(w.share_consumers)
        for c in w.copiers:
            ccfg = self._copier_config(0, c)
            if c.client == "java":
                java = copier_java_properties(ccfg, "")
                for side, prefix in (
                    ("producer", JAVA_PRODUCER_PREFIX),
                    ("consumer", JAVA_CONSUMER_PREFIX),
                ):
                    shown = {k[len(prefix) :]: v for k, v in java.items() if k.startswith(prefix)}
                    out[f"copier {c.id} {side}"] = _shown(shown)
                continue
            out[f"copier {c.id} producer"] = _shown(copier_producer_settings(ccfg, ""))
            out[f"copier {c.id} consumer"] = _shown(copier_consumer_settings(ccfg, ""))
        return out

    def _share_settings(self, share: KafkaShareSpec) -> dict[str, dict[str, str]]:
        """Each share consumer's client settings as it is given them, and the share group's
        configs as the harness sets them on the group."""
        out = {f"share group {share.group}": share.group_configs()}
        for process in share.processes():
            cfg = ShareConfig(
                process,
                self.scenario.cluster.topic,
                share.group,
                deadline=0.0,
                acknowledgement=share.acknowledgement,
                max_poll_records=share.max_poll_records,
            )
            if share.client == "java":
                out[f"share consumer {process}"] = _shown(share_java_properties(cfg, ""))
            else:
                out[f"share consumer {process}"] = _shown(share_settings(cfg, ""))
        return out

    def _start_clients(self, start: float) -> list[str]:
        w, t = self.scenario.workload, self.scenario.timeouts
        self.read_deadline = start + t.workload + t.recovery + w.drain_timeout + 30
        self.write_deadline = start + t.workload
        for r in w.readers:
            self._spawn("reader", r.id, self._reader_config(r))
        if w.share_consumers is not None:
            for process in w.share_consumers.processes():
                self._spawn("share", process, self._share_process_config(w.share_consumers))
        for c in w.copiers:
            self._spawn("copier", c.id, self._copier_process_config(c))
        for p in w.producers:
            self._spawn("producer", p.id, self._producer_process_config(p, start + p.start_at))
        return [p.id for p in w.producers]

    def _reader_config(self, spec: Any) -> dict[str, object]:
        config = self._client_config(
            self.read_deadline,
            group=spec.id,
            mode=spec.mode,
            commit_every=spec.commit_every,
            group_protocol=spec.group_protocol,
            delay=spec.delay,
            isolation=spec.isolation,
            config=spec.config,
        )
        config["topic"] = self.topic_of_reader(spec.topic)
        return config

    def _share_process_config(self, share: KafkaShareSpec) -> dict[str, object]:
        """What a share consumer process is told (workloads.kafka.share.ShareConfig)."""
        outcomes = share.outcome_shares()
        config = self._client_config(
            self.read_deadline,
            group=share.group,
            client=share.client,
            acknowledgement=share.acknowledgement,
            delay=share.delay,
            max_poll_records=share.max_poll_records,
            idle_s=share.drain_idle_s(),
            **outcomes,
        )
        if share.client == "java":
            config["java_version"] = self.kafka_release()
        return config

    def _copier_process_config(self, spec: Any) -> dict[str, object]:
        copier = asdict(self._copier_config(self.read_deadline, spec))
        if spec.client == "java":
            copier["java_version"] = self.kafka_release()
        return {"bootstrap_servers": self.bootstrap_servers, **copier}

    def _producer_process_config(self, spec: Any, not_before: float) -> dict[str, object]:
        knobs = spec.model_dump(exclude={"id", "start_at"})
        knobs["not_before"] = not_before
        if spec.transaction is not None and spec.transaction.client == "java":
            knobs["transaction"]["java_version"] = self.kafka_release()
        return self._client_config(self.write_deadline, **knobs)

    def restart_client(self, client: str) -> int:
        """A new instance of a client that was killed or stopped, as a process of its own
        (`C1.2`, `P1.2`, `R.2`, ...) whose history is its own; returns its process group.
        A copier or a transactional producer keeps its transactional id (the new instance's
        init fences the old) and, a copier, its group; a reader keeps its group; a plain
        producer goes on in its first instance's id space, from the sequence number after the
        last any instance of it began to send, so that the checker sees one producer."""
        w = self.scenario.workload
        if self.clients[self.current(client)].poll() is None:
            raise NemesisError(f"{client} still runs: kill-client or stop-client it first")
        instance = 2 + sum(1 for c in self.client_of.values() if c == client)
        process = f"{client}.{instance}"
        if copier := next((c for c in w.copiers if c.id == client), None):
            config = self._copier_process_config(copier)
            config["process"] = process  # its config names its first instance otherwise
            config["transactional_id"] = config["transactional_id"] or client
            role = "copier"
        elif producer := next((p for p in w.producers if p.id == client), None):
            config = self._producer_process_config(producer, 0.0)
            if producer.transaction is not None:
                txn = dict(config["transaction"])  # type: ignore[call-overload]
                txn["transactional_id"] = txn.get("transactional_id") or client
                config["transaction"] = txn
            else:
                config["producer_id"] = client
                config["first_seq"] = 1 + last_seq_sent(self.history_dir, client)
            role = "producer"
        elif reader := next((r for r in w.readers if r.id == client), None):
            config, role = self._reader_config(reader), "reader"
        elif (share := w.share_consumers) is not None and client in share.processes():
            # A new member of the same share group: the records its first instance held come
            # back to the group as their locks expire.
            config, role = self._share_process_config(share), "share"
        else:
            raise NemesisError(f"restart-client: no client {client!r} to restart")
        self._spawn(role, process, config)
        self.client_of[process] = client
        return self.clients[process].pid

    def _drain(self) -> None:
        """Copiers copy what is left of the input, then exit 0; then readers read every
        partition up to its high-water mark, then exit 0 (a reader of the copy's output drained
        before the copiers would read less than they copy), and share consumers leave once
        their group is idle; then the final read, a fresh reader from the first offset to the
        high-water marks."""
        w = self.scenario.workload
        codes: dict[str, int] = {}
        shares = w.share_consumers.processes() if w.share_consumers is not None else []
        for stage in ([c.id for c in w.copiers], [r.id for r in w.readers] + shares):
            for name in stage:
                self.clients[self.current(name)].send_signal(signal.SIGUSR1)
            deadline = time.time() + w.drain_timeout + 30
            codes |= {name: self._wait_client(name, deadline) for name in stage}
        if self.scenario.workload.final_read:
            codes[FINAL_READER] = self._final_read()
        self.manifest.consumer_exit_codes = codes
        self.manifest.drain_complete = all(code == 0 for code in codes.values())

    def _final_read(self) -> int:
        deadline = time.time() + self.scenario.workload.drain_timeout + 30
        config = self._client_config(deadline - 10, group=FINAL_READER, final=True)
        config["topic"] = self.topics()[-1]  # with a copy, its output: what the copy promises
        self._spawn("reader", FINAL_READER, config)
        return self._wait_client(FINAL_READER, deadline)


def _shown(settings: Mapping[str, object]) -> dict[str, str]:
    hidden = {"bootstrap.servers", "log_level", "debug"}
    return {k: to_property(v) for k, v in settings.items() if k not in hidden}  # type: ignore[arg-type]
