"""Shared fixtures. A missing prerequisite skips with its reason on a laptop and fails in CI."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests import tiers

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def missing(reason: str) -> None:
    """Fail in CI (a missing prerequisite there is a broken machine), skip elsewhere."""
    if IN_CI:
        pytest.fail(f"prerequisite missing in CI: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        missing("Java is not installed (PySpark needs Java 17+): run make setup")
    from checkers.engine import spark_session

    session = spark_session("local[2]")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def docker_client() -> Any:
    import docker
    import docker.errors

    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as e:
        missing(f"no Docker engine reachable ({e})")
    return client


@pytest.fixture(scope="session")
def rabbitmq_image(docker_client: Any) -> str:
    from compose.cli import ComposeError
    from systems.rabbitmq.cluster import choose_image

    try:
        return choose_image(None, docker_client)
    except ComposeError as e:
        missing(str(e))
        raise


COSTS = ("spark", "cluster", "e2e", "root")
CLOCK = tiers.Clock()


def pytest_addoption(parser: pytest.Parser) -> None:
    tiers.add_option(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test with no cost marker is a unit test: `make test-unit` runs those alone. Then the
    items of the other tier are deselected (tests/tiers.py)."""
    for item in items:
        if not any(item.get_closest_marker(c) for c in COSTS):
            item.add_marker(pytest.mark.unit)
    tiers.select(config, items)


WARM = contextlib.ExitStack()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Every `harness run` and `harness check` the tests start checks on one warm Spark Connect
    server, started here (outside any test's measured time) and ended with the session
    (checkers.engine.session), as make claims and make chaos do; a session of unit tests alone, or
    one collecting only, starts none."""
    costly = ("spark", "cluster", "e2e")
    if session.config.option.collectonly or not any(
        i.get_closest_marker(m) for i in session.items for m in costly
    ):
        return
    from checkers.engine import warm_server

    WARM.enter_context(warm_server())


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    CLOCK.add(report)


def pytest_sessionfinish(session: pytest.Session) -> None:
    WARM.close()
    if session.config.getoption("--record-durations") and CLOCK.seconds:
        tiers.record(CLOCK)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    for line in tiers.summary_lines(config, CLOCK):
        terminalreporter.write_line(line)
