"""The command line: `harness run | compare | new | diff | report | check | heal | validate |
schema | prune | export | list | claims | chaos | shrink | hunt | nightly | show | spark`.

The commands are in harness.commands, one module a group: `runs` (run, compare, heal),
`checker` (check, the spark group), `results` (report, show, diff, prune, export), `scenarios`
(new, validate, schema, list) and `campaigns` (claims, chaos, shrink, hunt, nightly); what they
share is `common`. This module assembles them into the app, in the order `harness --help` lists
them.

Bad input gets one line and exit 2; a verdict that does not match its claim exits 1; a bug
exits 3 with its traceback (EXIT_MEANINGS, which `harness --help` lists).
"""

from __future__ import annotations

import typer

from checkers.engine import forget_connect_mark
from harness.commands import campaigns, checker, results, runs, scenarios
from harness.commands.common import EXIT_CODES_HELP, run_app

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    epilog=EXIT_CODES_HELP,
)

# `harness --help` lists the commands in the order they are registered here (a group after them).
app.command(help=runs.RUN_HELP)(runs.run)
app.command()(runs.compare)
app.command()(scenarios.new)
app.command()(results.diff)
app.command()(results.report)
app.command()(checker.check)
app.add_typer(checker.spark_app, name="spark")
app.command()(runs.heal)
app.command()(scenarios.validate)
app.command()(scenarios.schema)
app.command(help=results.PRUNE_HELP)(results.prune)
app.command()(results.export)
app.command("list")(scenarios.list_scenarios)
app.command()(scenarios.ops)
app.command()(campaigns.claims)
app.command()(campaigns.chaos)
app.command()(campaigns.shrink)
app.command()(campaigns.hunt)
app.command()(campaigns.nightly)
app.command("show")(results.show)


def main() -> None:
    """The `harness` command: a usage error (an unknown option, a value out of range) is one
    line and exit 2, as every other bad input."""
    forget_connect_mark()  # a new process has no Connect session open, whatever it inherited
    run_app(app)


if __name__ == "__main__":
    main()
