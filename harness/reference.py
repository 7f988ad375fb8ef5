"""This harness's reference (docs/reference/): the pages of harness.reference_pages, its CLI page
made from harness.cli's app. The reference imports the app it documents; the app imports only
harness.reference_pages (`harness schema --reference` hands it its own command), never this.
"""

from __future__ import annotations

import typer

from harness.cli import app
from harness.reference_pages import cli_page as cli_page_of
from harness.reference_pages import reference_files as reference_files_of


def reference_files() -> dict[str, str]:
    """Each reference page by its file name, as `make reference` writes it."""
    return reference_files_of(typer.main.get_command(app))


def cli_page() -> str:
    """docs/reference/cli.md: every `harness` command, its arguments and options."""
    return cli_page_of(typer.main.get_command(app))
