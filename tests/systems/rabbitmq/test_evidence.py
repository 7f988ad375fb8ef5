"""A RabbitMQ node's evidence: what each node is asked, and what is kept of its answers (the real
questions run in the end-to-end tests)."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import zstandard

from compose.cli import ComposeError
from systems.rabbitmq.evidence import collect, questions

pytestmark = pytest.mark.unit


def archive_of(name: str, text: str) -> Any:
    """What docker's get_archive returns for one file: a tar stream and its stat."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        data = text.encode()
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return lambda path: (iter([buffer.getvalue()]), {"name": name})


def no_archive(path: str) -> Any:
    raise RuntimeError(f"Could not find the file {path} in container")


class FakeCluster:
    """rabbit1 answers in JSON, rabbit2's release has no JSON formatter, rabbit3 is paused;
    rabbit1 and rabbit3 have a feature flags file, rabbit2 none."""

    def containers(self) -> dict[str, Any]:
        flags = "[khepri_db,\n 'rabbitmq_4.2.0'].\n"
        return {
            "rabbit1": SimpleNamespace(status="running", get_archive=archive_of("ff", flags)),
            "rabbit2": SimpleNamespace(status="running", get_archive=no_archive),
            "rabbit3": SimpleNamespace(status="paused", get_archive=archive_of("ff", flags)),
        }

    def run_in(self, node: str, argv: list[str], what: str, timeout: float) -> str:
        if node == "rabbit2" and "--formatter" in argv:
            raise ComposeError(f"{what} on {node}: unknown option --formatter")
        if "quorum_status" in argv and argv[argv.index("quorum_status") + 1] == "gone":
            raise ComposeError(f"{what} on {node}: not_found")
        return json.dumps({"node": node, "argv": argv})


def test_every_running_node_is_asked_and_says_what_it_could_not_answer(tmp_path: Path) -> None:
    found = {
        n.node: n
        for n in collect(
            FakeCluster(), ["rabbit1", "rabbit2", "rabbit3"], "quorum", ["q", "gone"], tmp_path
        )  # type: ignore[arg-type]
    }
    assert found["rabbit3"].missing == ["not running"]
    # The flags file is copied from a node that does not run too: what it boots with.
    assert found["rabbit3"].answers == {"feature-flags": "rabbit3/feature-flags.txt.zst"}
    flags = (tmp_path / "rabbit3/feature-flags.txt.zst").read_bytes()
    assert b"rabbitmq_4.2.0" in zstandard.ZstdDecompressor().decompress(flags)
    assert any(m.startswith("feature-flags: Could not find") for m in found["rabbit2"].missing)
    one = found["rabbit1"]
    assert one.answers["quorum-status-q"] == "rabbit1/quorum-status-q.json.zst"
    assert any("not_found" in m for m in one.missing)  # the queue it does not know, said
    kept = zstandard.ZstdDecompressor().decompress((tmp_path / one.answers["queues"]).read_bytes())
    assert "list_queues" in json.loads(kept)["argv"]
    # A release without the formatter: its own table instead, as .txt.
    assert found["rabbit2"].answers["cluster-status"] == "rabbit2/cluster-status.txt.zst"


def test_a_stream_is_asked_its_stream_status_and_a_classic_queue_nothing_of_its_own() -> None:
    assert "stream-status-s" in questions("stream", ["s"])
    assert set(questions("classic", ["c"])) == {"cluster-status", "queues"}


@pytest.mark.parametrize(
    ("release", "asked"), [("3.10.8", False), ("3.13.7", True), ("4.3.6", True), (None, False)]
)
def test_the_metadata_store_is_asked_from_3_13(release: str | None, asked: bool) -> None:
    assert ("metadata-store" in questions("quorum", ["q"], release)) is asked
