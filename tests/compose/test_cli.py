"""Docker Compose as the harness runs it: what the first real runs found."""

from __future__ import annotations

from pathlib import Path


def test_an_up_that_printed_an_error_is_a_failure_even_with_exit_0() -> None:
    from compose.cli import _silent_failure

    network_error = (
        " Network p_cluster  Creating\n Network p_cluster  Error\n"
        "failed to create network p_cluster: Error response from daemon: Pool overlaps\n"
    )
    assert "Pool overlaps" in (_silent_failure(network_error) or "")
    assert "no such file" in (_silent_failure("open /x/docker-compose.yml: no such file") or "")
    fine = " Network p_cluster  Created\n Container p-kafka1-1  Started\n"
    assert _silent_failure(fine) is None


def test_compose_never_runs_through_the_wrapper_that_loses_exit_codes(tmp_path: Path) -> None:
    from compose.cli import _is_python_wrapper, compose_command

    wrapper = tmp_path / "docker-compose"
    wrapper.write_text("#!/usr/bin/python3\nfrom compose import docker_compose\n")
    assert _is_python_wrapper(wrapper)
    assert not any(_is_python_wrapper(Path(part)) for part in compose_command() if "/" in part)
