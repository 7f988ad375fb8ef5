"""Which Kafka release a --kafka value means, and what an unknown one is answered with."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from compose.releases import setup_releases
from contract.versions import line_of, on_spec
from systems.kafka.config import KAFKA_LINES
from systems.kafka.releases import (
    KafkaReleaseError,
    check_spec,
    maven_releases,
    newest_per_line,
    resolve,
)
from tests.systems.kafka.docker_fakes import FakeDocker, FakeImage

ROOT = Path(__file__).resolve().parents[3]
MAVEN = ["3.6.2", "3.7.2", "3.9.1", "3.9.2", "4.0.0", "4.1.2", "4.3.0", "4.3.1", "4.4.0"]


def test_setup_builds_the_three_lines_the_claims_matrix_covers() -> None:
    assert setup_releases("kafka") == ("3.9.2", "4.1.2", "4.4.0")
    assert KAFKA_LINES == ("3.9", "4.1", "4.4")
    assert setup_releases("rabbitmq") == ("3.10.8", "4.0.5", "4.3.6")


def test_a_line_holds_its_releases_and_a_release_only_itself() -> None:
    assert on_spec("4.4.0", "4.4") and on_spec("4.4.0", "4.4.0") and not on_spec("4.4.1", "4.4.0")
    assert not on_spec("4.10.0", "4.1") and line_of("4.3.1") == "4.3"


@pytest.mark.parametrize(
    ("spec", "why"),
    [("x", "release line or release"), ("4", "release line or release"), ("3.6", "older than 3.7")],
)
def test_a_malformed_or_too_old_version_is_one_line(spec: str, why: str) -> None:
    with pytest.raises(KafkaReleaseError, match=why):
        check_spec(spec)


def test_a_local_image_answers_first_then_the_newest_release_maven_offers() -> None:
    assert resolve("3.9", ["3.9.1"], MAVEN) == "3.9.1"  # present: no newer patch fetched
    assert resolve("4.3", [], MAVEN) == "4.3.1"
    assert resolve("4.3.0", ["4.3.1"], MAVEN) == "4.3.0"
    assert resolve("3.7", [], MAVEN) == "3.7.2"


def test_an_unknown_version_names_the_newest_releases_per_line() -> None:
    with pytest.raises(KafkaReleaseError) as e:
        resolve("4.9", [], MAVEN)
    assert str(e.value) == (
        "Kafka 4.9 is not on Maven Central; its newest releases: 4.4.0, 4.3.1, 4.1.2, 4.0.0"
    )
    assert newest_per_line(MAVEN, 2) == ["4.4.0", "4.3.1"]
    with pytest.raises(KafkaReleaseError, match="Maven Central cannot be read"):
        resolve("4.3", [], None)


def maven_mirror(root: Path, versions: list[str]) -> str:
    """A directory laid out as Maven Central's metadata for kafka_2.13."""
    meta = root / "org/apache/kafka/kafka_2.13/maven-metadata.xml"
    meta.parent.mkdir(parents=True)
    listed = "".join(f"<version>{v}</version>" for v in versions)
    meta.write_text(f"<metadata><versioning><versions>{listed}</versions></versioning></metadata>")
    return root.as_uri()


def test_maven_central_metadata_is_read_from_its_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAVEN_CENTRAL", maven_mirror(tmp_path, ["4.0.0", "3.9.2", "4.0.0-rc1"]))
    assert maven_releases() == ["3.9.2", "4.0.0"]
    monkeypatch.setenv("MAVEN_CENTRAL", (tmp_path / "nowhere").as_uri())
    assert maven_releases() is None


@pytest.mark.cluster  # the images present are the engine's to say
def test_the_cli_refuses_an_unknown_kafka_release_in_one_line(tmp_path: Path) -> None:
    """No image of 4.9 is present and the (local) Maven Central lists none: one line, exit 2."""
    mirror = maven_mirror(tmp_path / "maven", MAVEN)
    result = subprocess.run(
        [".venv/bin/harness", "run", "K4", "--kafka", "4.9", "--results", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "MAVEN_CENTRAL": mirror, "HOME": str(tmp_path)},
    )
    assert result.returncode == 2, result.stderr
    (line,) = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
    assert "4.9 is not on Maven Central" in line and "4.4.0, 4.3.1" in line, line
    assert "Traceback" not in result.stderr


def test_releases_present_locally_are_the_kafka_images_versions() -> None:
    from systems.kafka.cluster import local_kafka_releases

    client = FakeDocker(
        FakeImage("brokerjepsen/kafka:4.4.0-debian", "4.4.0"),
        FakeImage("apache/kafka:3.9.1"),
        FakeImage("brokerjepsen/rabbitmq:4.0.5-debian"),
    )
    assert local_kafka_releases(client) == ["3.9.1", "4.4.0"]  # type: ignore[arg-type]


def test_the_metadata_version_a_controller_logged_both_ways_releases_write_it() -> None:
    from systems.kafka.cluster import logged_metadata_version

    old = "Loaded new metadata FinalizedFeatures[metadataVersion=4.1-IV1, finalizedFeatures={"
    new = "Loaded new metadata FinalizedFeatures(metadataVersion=Optional[4.4-IV2], finalized"
    assert logged_metadata_version(old) == "4.1-IV1"
    assert logged_metadata_version(old + "\n" + new) == "4.4-IV2"
    assert logged_metadata_version("nothing here") is None
