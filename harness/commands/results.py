"""The commands on run folders once their runs are over: `harness report` (a run's report.html
and junit.xml, or the index), `harness show` (a run's verdict), `harness diff` (two runs setting
by setting), `harness prune` (old runs by a retention policy) and `harness export` (a packed
history as plain JSONL)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from checkers.summary import summary_lines
from contract.retention import DEFAULT_KEEP_DAYS, DEFAULT_KEEP_FAILURES_DAYS, DEFAULT_KEEP_LAST
from contract.rundir import DEFAULT_ROOT, RunDir
from harness.commands.common import _fail, out

PRUNE_HELP = (
    "Remove old run folders by a retention policy. Never removes a run still running, a run "
    "docs/claims-results.md or scenarios/found/ refers to, or the newest --keep-last runs of a "
    f"scenario ({DEFAULT_KEEP_LAST} unless told), not even over --max-gb."
)


def diff(
    left: Annotated[Path, typer.Argument(help="a run directory")],
    right: Annotated[Path, typer.Argument(help="another run directory")],
    every: Annotated[bool, typer.Option("--all", help="the settings they share too")] = False,
) -> None:
    """Two runs setting by setting: what differed in their configuration, releases and
    verdicts (the settings each run's manifest recorded)."""
    from contract.manifest import ManifestError
    from reports.diff import diff_rows

    try:
        rows = diff_rows(left, right)
    except ManifestError as e:
        raise _fail(str(e)) from None
    shown = [r for r in rows if every or r.differs or r.scope == "run"]
    table = Table("scope", "setting", left.name, right.name, box=None, pad_edge=False)
    for r in shown:
        # Text, not markup: a value may hold brackets (a policy's pattern, a regex).
        cells = [Text(x) for x in (r.scope, r.key, r.left, r.right)]
        table.add_row(*cells, style="bold" if r.differs else "")
    out.print(table)
    differing = sum(r.differs for r in rows if r.scope != "run")
    out.print(f"{differing} settings differ", markup=False)


def report(
    run_dir: Annotated[Path | None, typer.Argument(help="a run directory")] = None,
    index: Annotated[bool, typer.Option("--index", help="write RESULTS/index.html")] = False,
    results: Annotated[Path, typer.Option(help="results root (--index)")] = DEFAULT_ROOT,
) -> None:
    """Rebuild a run's report.html and junit.xml, or (--index) the index of every run."""
    from reports.index import render_index
    from reports.run_data import ReportError
    from reports.write import write_run_reports

    if (run_dir is None) == (not index):
        raise _fail("give a run directory, or --index (not both)")
    try:
        if run_dir is not None:
            written = write_run_reports(run_dir)
        else:
            from harness.claims import DOCS

            written = [render_index(results, DOCS / "claims-results.json")]
    except (ReportError, OSError) as e:
        raise _fail(str(e)) from None
    for path in written:
        out.print(f"{path.stem}: {path}", markup=False)


def prune(
    results: Annotated[Path, typer.Option(help="results root")] = DEFAULT_ROOT,
    keep_days: Annotated[
        float, typer.Option(min=0, help="keep a run that matched this many days")
    ] = DEFAULT_KEEP_DAYS,
    keep_failures_days: Annotated[
        float, typer.Option(min=0, help="keep a failed run (no verdict, or a mismatch) this long")
    ] = DEFAULT_KEEP_FAILURES_DAYS,
    keep_last: Annotated[
        int, typer.Option(min=1, help="keep the newest N runs of each scenario whatever their age")
    ] = DEFAULT_KEEP_LAST,
    max_gb: Annotated[
        float | None, typer.Option(min=0, help="then remove the oldest runs left over this size")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option(help="say what would be removed, remove nothing")
    ] = False,
) -> None:
    from contract.retention import Policy, apply_policy

    if not results.is_dir():
        raise _fail(f"--results {results}: no such folder")
    policy = Policy(keep_days, keep_failures_days, keep_last, max_gb)
    pruning = apply_policy(results, policy, dry_run)
    verb = "would remove" if dry_run else "removed"
    for d in pruning.removed:
        out.print(f"{verb} {d.run.path} ({_mb(d.run.size)}): {d.why}", markup=False)
    out.print(
        f"{'would free' if dry_run else 'freed'} {_mb(pruning.freed)} of "
        f"{len(pruning.decisions)} runs; {_mb(pruning.left)} left in {results}",
        markup=False,
    )


def _mb(size: int) -> str:
    return f"{size / 1024**2:.1f} MB"


def export(
    run_dir: Annotated[Path, typer.Argument(help="a run directory with history/")],
    jsonl: Annotated[
        bool, typer.Option("--jsonl", help="the history as plain JSONL, one file a process")
    ] = False,
    to: Annotated[
        Path | None,
        typer.Option(help="write the files here and leave the run packed (default: in place)"),
    ] = None,
    salvage: Annotated[
        bool,
        typer.Option(help="of a damaged packed file, the whole frames before the damage"),
    ] = False,
) -> None:
    """Give a run's history back as plain JSONL, byte for byte as the clients wrote it: in
    place (the run is plain again) or, with --to, as a copy."""
    from contract.packed import PackError, history_paths, unpack_history

    if not jsonl:
        raise _fail("export: say the form, --jsonl (the only one there is)")
    history = RunDir(run_dir).history
    if not history.is_dir() or not history_paths(history):
        raise _fail(f"{run_dir}: no history (history/*.jsonl or *.jsonl.zst)")
    if to is not None and to.resolve() == history.resolve():
        to = None
    try:
        written = unpack_history(history, to, salvage)
    except (PackError, OSError) as e:
        raise _fail(f"export: {e}") from None
    size = sum(p.stat().st_size for p in written)
    out.print(f"{len(written)} files, {_mb(size)}: {written[0].parent}", markup=False)


def show(
    run_dir: Annotated[Path, typer.Argument(help="a run directory")],
    as_json: Annotated[bool, typer.Option("--json", help="the whole verdict.json")] = False,
) -> None:
    """A run's verdict: its summary, and where its report is (--json: verdict.json itself)."""

    try:
        verdict = json.loads((run_dir / "verdict.json").read_text())
    except (OSError, ValueError) as e:
        raise _fail(f"{run_dir}: no readable verdict.json ({e})") from None
    if as_json:
        out.print_json(json.dumps(verdict))
        return
    try:
        lines = summary_lines(verdict)
    except (KeyError, TypeError) as e:
        raise _fail(f"{run_dir}: verdict.json lacks {e} (harness show --json shows it)") from None
    for line in lines:
        out.print(line, markup=False)
    if (run_dir / "report.html").exists():
        out.print(f"report: {run_dir / 'report.html'}", markup=False)
