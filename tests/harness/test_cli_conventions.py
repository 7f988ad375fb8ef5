"""The command line's conventions: exit codes said alike in --help, the CLI reference and
scripts/exit-meaning.sh; --json leaves stdout to one JSON document; --quiet; `harness list` in
natural order; a crash exits 3, not a verdict's 1."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from contract.retention import DEFAULT_KEEP_LAST
from harness.commands.common import (
    EXIT_BUG,
    EXIT_MEANINGS,
    EXIT_MISMATCH,
    _json_alone_on_stdout,
    _print_json,
    _print_verdict,
    run_app,
)
from harness.scenario_options import scenarios_in_order
from tests.helpers import ROOT, harness

pytestmark = pytest.mark.unit

EXIT_MEANING_SCRIPT = ROOT / "scripts" / "exit-meaning.sh"


def _words(text: str) -> str:
    """Help text as words alone: rich wraps it at the terminal's width and pads its columns."""
    return " ".join(text.split())


@pytest.mark.parametrize("args", [["--help"], ["run", "--help"]])
def test_help_lists_every_exit_code_with_its_meaning(args: list[str]) -> None:
    helped = harness(*args)
    assert helped.returncode == 0, helped.stderr
    for code, meaning in EXIT_MEANINGS.items():
        assert f"{code} {meaning}." in _words(helped.stdout), (code, helped.stdout)


def test_the_cli_reference_lists_every_exit_code_with_its_meaning() -> None:
    from harness.reference import cli_page

    run_section = cli_page().split("## harness run\n", 1)[1].split("\n## ", 1)[0]
    for code, meaning in EXIT_MEANINGS.items():
        assert f"{code} {meaning}." in run_section, code


def test_exit_meaning_sh_says_what_the_harness_means_by_each_code() -> None:
    script = EXIT_MEANING_SCRIPT.read_text()
    assert {int(c) for c in re.findall(r"^\s*(\d+)\)", script, re.M)} == set(EXIT_MEANINGS)
    for code, meaning in EXIT_MEANINGS.items():
        said = subprocess.run(
            ["bash", str(EXIT_MEANING_SCRIPT), "harness", str(code)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert said.returncode == 0
        expected = (
            ""
            if code == 0
            else f"harness exited {code}: {meaning} (make itself exits 2 for any failure)\n"
        )
        assert said.stderr == expected, code


def test_a_crash_exits_3_with_its_traceback_not_1(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    app = typer.Typer()

    @app.command()
    def crash() -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(sys, "argv", ["harness"])
    with pytest.raises(SystemExit) as exited:
        run_app(app)
    assert exited.value.code == EXIT_BUG
    said = capsys.readouterr().err
    assert "Traceback" in said and "error: a bug in the harness: RuntimeError: boom" in said


def test_scenarios_are_listed_folder_by_folder_with_numbers_as_numbers(tmp_path: Path) -> None:
    names = ["K10", "K2", "K1", "K11", "K2-b", "baseline", "sub/X10", "sub/X9", "a/Z"]
    for name in names:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f"{name}.yaml").write_text("")
    listed = [
        p.relative_to(tmp_path).with_suffix("").as_posix() for p in scenarios_in_order(tmp_path)
    ]
    assert listed == ["K1", "K2", "K2-b", "K10", "K11", "baseline", "a/Z", "sub/X9", "sub/X10"]


def test_list_json_is_the_listing_s_rows_as_objects_in_natural_order() -> None:
    as_json = harness("list", "--json")
    assert as_json.returncode == 0, as_json.stderr
    rows = json.loads(as_json.stdout)
    assert set(rows[0]) == {"scenario", "claim", "runs_on", "expect", "description"}
    as_text = harness("list")
    assert [r["scenario"] for r in rows] == [
        ln.split()[0] for ln in as_text.stdout.splitlines()[1:]
    ]
    k4 = next(r for r in rows if r["scenario"] == "K4")
    assert (k4["claim"], k4["runs_on"], k4["expect"]) == (
        "K4",
        "kafka kraft-dedicated,zk,kraft",
        "safe",
    )
    claims = [int(r["scenario"][1:]) for r in rows if re.fullmatch(r"K\d+", r["scenario"])]
    assert claims == sorted(claims) and len(claims) > 10


@pytest.mark.parametrize("verbosity", ["-q", "--quiet", "-v", "--verbose"])
def test_run_takes_quiet_and_verbose_and_a_bad_scenario_leaves_json_stdout_empty(
    verbosity: str,
) -> None:
    done = harness("run", "no-such-scenario", verbosity, "--json", timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: no scenario 'no-such-scenario'"), lines


def test_prune_help_says_how_many_newest_runs_are_kept() -> None:
    helped = harness("prune", "--help")
    said = f"the newest --keep-last runs of a scenario ({DEFAULT_KEEP_LAST} unless told)"
    assert said in _words(helped.stdout), helped.stdout


def test_under_json_whatever_else_writes_to_stdout_goes_to_stderr(
    capfd: pytest.CaptureFixture[str],
) -> None:
    @_json_alone_on_stdout
    def command(as_json: bool) -> None:
        print("a library's print")
        os.write(1, b"a child's banner\n")
        _print_json({"matched": True})

    command(as_json=True)
    captured = capfd.readouterr()
    assert json.loads(captured.out) == {"matched": True}
    assert "a library's print" in captured.err and "a child's banner" in captured.err
    command(as_json=False)  # without --json, stdout is everyone's
    assert "a library's print" in capfd.readouterr().out


def test_a_verdict_as_json_carries_the_run_folder_and_the_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    verdict = {"outcome": "loss", "matched": False, "expect": "safe", "reason": "r"}
    code = _print_verdict(verdict, tmp_path, as_json=True)
    assert code == EXIT_MISMATCH
    document = json.loads(capsys.readouterr().out)
    assert document == {"verdict": verdict, "run_dir": str(tmp_path), "reports": {}}
