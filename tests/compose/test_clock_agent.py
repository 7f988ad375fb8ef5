"""The Kafka and ZooKeeper nodes' fake clock, the Java agent: built as make setup builds it, then
run on a small class of Kafka's package, whose time of day moves with the clock file while it
runs, and on a class of another package, whose time stays true."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from compose import clock_agent
from compose.clocks import write_offset
from tests.conftest import missing

PROBE = """
package {package};
public class Probe {{
  public static void main(String[] args) throws Exception {{
    for (int i = 0; i < {reads}; i++) {{
      System.out.println(System.currentTimeMillis() + " " + java.time.Instant.now().toEpochMilli());
      System.out.flush();
      Thread.sleep(400);
    }}
  }}
}}
"""


def agent_jar() -> Path:
    for tool in ("mvn", "javac", "jar", "java"):
        if shutil.which(tool) is None:
            missing(f"the clock agent needs {tool} (make setup)")
    return clock_agent.ensure() / clock_agent.JAR


def probe(tmp_path: Path, package: str, reads: int) -> list[str]:
    """The command that runs Probe of `package` under the agent, reading tmp_path/faketime."""
    source = tmp_path / "src" / package / "Probe.java"
    source.parent.mkdir(parents=True)
    source.write_text(PROBE.format(package=package, reads=reads))
    classes = tmp_path / "classes"
    subprocess.run(["javac", "-d", str(classes), str(source)], check=True, timeout=120)
    agent = f"-javaagent:{agent_jar()}={tmp_path / 'faketime'}"
    return ["java", agent, "-cp", str(classes), f"{package}.Probe"]


def read_offsets(line: str) -> list[float]:
    """Each of the line's two times, as seconds off the host's time now."""
    now = time.time()
    return [int(x) / 1000 - now for x in line.split()]


def test_kafkas_time_of_day_follows_the_clock_file_while_it_runs(tmp_path: Path) -> None:
    write_offset(tmp_path, 3600)
    argv = probe(tmp_path, "kafka", reads=12)
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        first = read_offsets(proc.stdout.readline())
        write_offset(tmp_path, -7200.5)
        lines = [proc.stdout.readline() for _ in range(11)]
    assert all(3598 < t < 3602 for t in first), first
    last = read_offsets(lines[-1])  # read >1 s after the file changed
    assert all(-7203 < t < -7198 for t in last), last


def test_a_class_of_no_rewritten_package_keeps_true_time(tmp_path: Path) -> None:
    write_offset(tmp_path, 3600)
    out = subprocess.run(
        probe(tmp_path, "elsewhere", reads=1), capture_output=True, text=True, timeout=60
    )
    assert all(abs(t) < 2 for t in read_offsets(out.stdout.splitlines()[0])), out.stdout
    assert "brokerjepsen clock agent" in out.stderr  # the agent ran all the same


def test_the_agent_without_a_clock_file_refuses_to_start_the_jvm(tmp_path: Path) -> None:
    jar = agent_jar()
    out = subprocess.run(
        ["java", f"-javaagent:{jar}", "-version"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode != 0 and "-javaagent:clock-agent.jar=FILE" in out.stderr


@pytest.mark.parametrize("line", ["", "soon"])
def test_an_unreadable_clock_line_leaves_the_offset_it_had(tmp_path: Path, line: str) -> None:
    (tmp_path / "faketime").write_text(line)
    out = subprocess.run(
        probe(tmp_path, "kafka", reads=1), capture_output=True, text=True, timeout=60
    )
    assert all(abs(t) < 2 for t in read_offsets(out.stdout.splitlines()[0])), out.stdout
