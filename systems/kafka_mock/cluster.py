"""librdkafka's mock cluster: the `kafka-mock` tier, for when no Kafka image is available.

confluent-kafka bundles librdkafka, whose mock cluster serves the real Kafka protocol on
127.0.0.1 and exports a fault API (brokers down/up, leader moves, injected request errors,
round-trip delays). We reach it with ctypes. It proves our Kafka client, history, nemesis
plumbing and checker; it does not replicate like Kafka, so its results never count toward a
K-claim.
"""

from __future__ import annotations

import ctypes
import glob
import os
from functools import cache

import confluent_kafka

TIER = "kafka-mock"
_PRODUCER = 0


@cache
def _lib() -> ctypes.CDLL:
    libs = os.path.join(
        os.path.dirname(confluent_kafka.__file__), os.pardir, "confluent_kafka.libs"
    )
    found = sorted(glob.glob(os.path.join(libs, "librdkafka*.so*")))
    if not found:
        raise OSError("confluent-kafka's bundled librdkafka not found (needed by the mock tier)")
    lib = ctypes.CDLL(found[0])
    vp, i32, cp = ctypes.c_void_p, ctypes.c_int32, ctypes.c_char_p
    signatures = {
        "rd_kafka_conf_new": (vp, []),
        "rd_kafka_conf_set": (ctypes.c_int, [vp, cp, cp, cp, ctypes.c_size_t]),
        "rd_kafka_new": (vp, [ctypes.c_int, vp, cp, ctypes.c_size_t]),
        "rd_kafka_destroy": (None, [vp]),
        "rd_kafka_mock_cluster_new": (vp, [vp, ctypes.c_int]),
        "rd_kafka_mock_cluster_destroy": (None, [vp]),
        "rd_kafka_mock_cluster_bootstraps": (cp, [vp]),
        "rd_kafka_mock_topic_create": (ctypes.c_int, [vp, cp, ctypes.c_int, ctypes.c_int]),
        "rd_kafka_mock_broker_set_down": (ctypes.c_int, [vp, i32]),
        "rd_kafka_mock_broker_set_up": (ctypes.c_int, [vp, i32]),
        "rd_kafka_mock_broker_set_rtt": (ctypes.c_int, [vp, i32, ctypes.c_int]),
        "rd_kafka_mock_partition_set_leader": (ctypes.c_int, [vp, cp, i32, i32]),
        "rd_kafka_mock_push_request_errors_array": (
            None,
            [vp, ctypes.c_int16, ctypes.c_size_t, ctypes.POINTER(ctypes.c_int)],
        ),
        "rd_kafka_mock_clear_request_errors": (None, [vp, ctypes.c_int16]),
    }
    for name, (restype, argtypes) in signatures.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


class MockKafkaError(Exception):
    """The mock cluster refused a call; one line for the user."""


class MockKafkaCluster:
    """A mock Kafka cluster of `brokers` brokers (ids 1..n) living in this process."""

    PRODUCE_API_KEY = 0

    def __init__(self, brokers: int = 3) -> None:
        lib = _lib()
        self._lib = lib
        errstr = ctypes.create_string_buffer(512)
        conf = lib.rd_kafka_conf_new()
        # The handle only owns the mock cluster; it never connects anywhere.
        lib.rd_kafka_conf_set(conf, b"log_level", b"0", errstr, 512)
        self._rk = lib.rd_kafka_new(_PRODUCER, conf, errstr, 512)
        if not self._rk:
            raise MockKafkaError(f"rd_kafka_new failed: {errstr.value.decode()}")
        self._mcluster = lib.rd_kafka_mock_cluster_new(self._rk, brokers)
        if not self._mcluster:
            lib.rd_kafka_destroy(self._rk)
            raise MockKafkaError("rd_kafka_mock_cluster_new failed")
        self.brokers = tuple(range(1, brokers + 1))
        self.bootstrap_servers: str = lib.rd_kafka_mock_cluster_bootstraps(self._mcluster).decode()

    def _check(self, code: int, what: str) -> None:
        if code != 0:
            raise MockKafkaError(
                f"mock cluster: {what} failed ({confluent_kafka.KafkaError(code)})"
            )

    def create_topic(self, topic: str, partitions: int, replication_factor: int) -> None:
        code = self._lib.rd_kafka_mock_topic_create(
            self._mcluster, topic.encode(), partitions, replication_factor
        )
        self._check(code, f"create topic {topic}")

    def broker_down(self, broker: int) -> None:
        self._check(self._lib.rd_kafka_mock_broker_set_down(self._mcluster, broker), "broker down")

    def broker_up(self, broker: int) -> None:
        self._check(self._lib.rd_kafka_mock_broker_set_up(self._mcluster, broker), "broker up")

    def set_rtt(self, broker: int, rtt_ms: int) -> None:
        code = self._lib.rd_kafka_mock_broker_set_rtt(self._mcluster, broker, rtt_ms)
        self._check(code, "set rtt")

    def set_leader(self, topic: str, partition: int, broker: int) -> None:
        code = self._lib.rd_kafka_mock_partition_set_leader(
            self._mcluster, topic.encode(), partition, broker
        )
        self._check(code, f"move leader of {topic}/{partition}")

    def push_produce_errors(self, errors: list[int]) -> None:
        """The next Produce requests fail with these error codes, in order."""
        self.push_request_errors(self.PRODUCE_API_KEY, errors)

    def push_request_errors(self, api_key: int, errors: list[int]) -> None:
        """The next requests of this Kafka API fail with these error codes, in order."""
        array = (ctypes.c_int * len(errors))(*errors)
        self._lib.rd_kafka_mock_push_request_errors_array(
            self._mcluster, api_key, len(errors), array
        )

    def close(self) -> None:
        if self._mcluster:
            self._lib.rd_kafka_mock_cluster_destroy(self._mcluster)
            self._mcluster = None
        if self._rk:
            self._lib.rd_kafka_destroy(self._rk)
            self._rk = None

    def __enter__(self) -> MockKafkaCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
