"""The harness's own metadata requests: one that timed out is asked again (a broker a fault
slows towards the clients slows the harness's admin client too)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from systems.kafka.admin import KafkaAdmin
from tests.helpers import ROOT


class _Admin:
    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.asked = 0

    def list_topics(self, topic: str, timeout: float) -> Any:
        self.asked += 1
        if self.asked <= self.failures:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "Failed to get metadata"))
        partitions = {0: SimpleNamespace(leader=1, isrs=[1], replicas=[1])}
        topics = {topic: SimpleNamespace(error=None, partitions=partitions)}
        return SimpleNamespace(topics=topics)


def _admin(failures: int) -> tuple[KafkaAdmin, _Admin]:
    admin = KafkaAdmin.__new__(KafkaAdmin)
    fake = _Admin(failures)
    admin.admin, admin.topic = fake, "jepsen"
    return admin, fake


def test_a_timed_out_metadata_request_is_asked_again() -> None:
    admin, fake = _admin(failures=2)
    assert admin.topic_metadata().topics["jepsen"].partitions
    assert fake.asked == 3


def test_past_the_deadline_the_timeout_is_the_answer() -> None:
    admin, _ = _admin(failures=99)
    with pytest.raises(KafkaException):
        admin.topic_metadata(within=1)


QUIET_ADMIN = """
import sys
from pathlib import Path
from types import SimpleNamespace
from systems.kafka.admin import KafkaAdmin

log = Path(sys.argv[1])
admin = KafkaAdmin(SimpleNamespace(admin_servers="127.0.0.1:9"), "t", log)  # nothing listens
try:
    admin.admin.list_topics(timeout=1)
except Exception:
    pass
admin.admin.poll(0)  # serves the lines it queued, as the watch and the harness's asks do
"""


def test_the_harness_admin_clients_librdkafka_lines_go_to_the_runs_log(tmp_path: Path) -> None:
    """A broker refusing connections (down, or cut off by a fault) is the admin client's
    everyday news: it belongs in the run's logs, not on the console above the verdict."""
    log = tmp_path / "harness-admin.log"
    done = subprocess.run(
        [sys.executable, "-c", QUIET_ADMIN, str(log)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == "" and done.stdout == ""
    assert "Connection refused" in log.read_text()


@pytest.mark.parametrize(
    ("text", "outcome"),
    [
        ("Successfully completed leader election (UNCLEAN) for partitions jepsen-0", "ok"),
        ("Valid replica already elected for partitions jepsen-0", "ELECTION_NOT_NEEDED"),
        (
            "Error completing leader election (UNCLEAN) for partition: jepsen-0: "
            "org.apache.kafka.common.errors.EligibleLeadersNotAvailableException: none alive",
            "org.apache.kafka.common.errors.EligibleLeadersNotAvailableException: none alive",
        ),
        ("", "no answer"),
    ],
)
def test_the_election_tools_answers(text: str, outcome: str) -> None:
    from systems.kafka.admin import election_tool_outcome

    assert election_tool_outcome(text).endswith(outcome.rsplit(".", 1)[-1])


@pytest.mark.parametrize("assignment", [None, [[2, 3, 4]], [[1, 2, 3], [2, 3, 1]]])
def test_the_topic_request_passes_the_clients_own_checks(assignment: Any) -> None:
    from confluent_kafka.admin import AdminClient

    from systems.kafka.admin import new_topic

    # No broker answers port 1: only the client's validation of the request runs.
    admin = AdminClient({"bootstrap.servers": "127.0.0.1:1", "log_level": 0})
    topic = new_topic("t", 1, 3, assignment, {"min.insync.replicas": "2"})
    futures = admin.create_topics([topic], request_timeout=1)  # raises ValueError if malformed
    assert set(futures) == {"t"}


def test_an_election_request_is_sent_not_refused_by_the_client() -> None:
    """The first real K13 run: elect_leaders(..., request_timeout=10) raised SystemError in
    confluent-kafka's binding. The request must reach the wire; with no broker it times out."""
    import concurrent.futures

    from confluent_kafka.admin import AdminClient

    from systems.kafka.admin import KafkaAdmin

    admin = KafkaAdmin.__new__(KafkaAdmin)
    admin.topic = "t"
    admin.admin = AdminClient({"bootstrap.servers": "127.0.0.1:1", "log_level": 0})
    with pytest.raises((concurrent.futures.TimeoutError, TimeoutError)):
        admin.elect("unclean", [0], wait=1)


def test_election_outcomes_as_the_client_reports_them() -> None:
    """K2's first real run: per-partition results are KafkaError objects, which have no args."""
    from confluent_kafka import KafkaError, KafkaException

    from systems.kafka.admin import election_outcome

    assert election_outcome(None) == "ok"
    assert election_outcome(KafkaError(KafkaError.ELECTION_NOT_NEEDED)) == "ELECTION_NOT_NEEDED"
    wrapped = KafkaException(KafkaError(KafkaError.ELIGIBLE_LEADERS_NOT_AVAILABLE))
    assert election_outcome(wrapped) == "ELIGIBLE_LEADERS_NOT_AVAILABLE"


class _ConfigAdmin:
    """An admin client whose group configs are what it was last asked to set, after `stale`
    reads that still say the defaults (a broker whose metadata has not taken the change yet)."""

    def __init__(self, stale: int = 0) -> None:
        self.altered: list[Any] = []
        self.stale = stale
        self.reads = 0

    def incremental_alter_configs(self, resources: list[Any], request_timeout: float) -> Any:
        from concurrent.futures import Future

        self.altered += resources
        done: Future[None] = Future()
        done.set_result(None)
        return {resources[0]: done}

    def describe_configs(self, resources: list[Any], request_timeout: float) -> Any:
        from concurrent.futures import Future

        self.reads += 1
        said = {
            e.name: SimpleNamespace(value=e.value if self.reads > self.stale else "default")
            for e in self.altered[-1].incremental_configs
        }
        said["share.isolation.level"] = SimpleNamespace(value="read_uncommitted")  # a default
        done: Future[dict[str, Any]] = Future()
        done.set_result(said)
        return {resources[0]: done}


def test_a_share_groups_configs_are_set_on_its_group_resource_and_read_back() -> None:
    from confluent_kafka.admin import AlterConfigOpType, ResourceType

    admin = KafkaAdmin.__new__(KafkaAdmin)
    fake = _ConfigAdmin()
    admin.admin = fake  # type: ignore[assignment]
    wanted = {"share.record.lock.duration.ms": "15000", "share.auto.offset.reset": "earliest"}
    assert admin.set_group_configs("share", wanted) == wanted
    (resource,) = fake.altered
    assert (resource.restype, resource.name) == (ResourceType.GROUP, "share")
    assert {e.name: e.value for e in resource.incremental_configs} == wanted
    ops = {e.incremental_operation for e in resource.incremental_configs}
    assert ops == {AlterConfigOpType.SET}


def test_a_group_config_read_back_before_the_brokers_took_it_is_read_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("systems.kafka.admin.GROUP_CONFIG_POLL_S", 0.0)
    admin = KafkaAdmin.__new__(KafkaAdmin)
    fake = _ConfigAdmin(stale=2)
    admin.admin = fake  # type: ignore[assignment]
    wanted = {"share.record.lock.duration.ms": "15000"}
    assert admin.set_group_configs("share", wanted) == wanted and fake.reads == 3
    # Never taken within the time: what a broker said last, for the run to record and warn of.
    never = _ConfigAdmin(stale=10**6)
    admin.admin = never  # type: ignore[assignment]
    said = admin.set_group_configs("share", wanted, timeout=0.05)
    assert said == {"share.record.lock.duration.ms": "default"}


def test_a_group_config_request_passes_the_clients_own_checks() -> None:
    """confluent-kafka takes a GROUP resource (KIP-848's, mapped to the config API's own type):
    with no broker it is sent and times out, in one line."""
    from confluent_kafka.admin import AdminClient

    from compose.cli import ComposeError

    admin = KafkaAdmin.__new__(KafkaAdmin)
    admin.topic = "t"
    admin.admin = AdminClient({"bootstrap.servers": "127.0.0.1:1", "log_level": 0})
    # Whichever comes first, the request's own timeout or the wait for its answer: one line.
    timed_out = r"(no answer within 1 s.*|.*Timed out.*)$"
    with pytest.raises(ComposeError, match=rf"cannot set group share's configs: {timed_out}"):
        admin.set_group_configs("share", {"share.auto.offset.reset": "earliest"}, timeout=1)
    with pytest.raises(ComposeError, match=rf"cannot describe topic t: {timed_out}") as e:
        admin.topic_id("t", timeout=1)
    assert "\n" not in str(e.value)
