"""`harness new NAME --system kafka|rabbitmq`: a scenario of the user's own from a commented
template that lists the knobs; what it writes always loads (a test checks each template)."""

from __future__ import annotations

import re
from pathlib import Path

from systems.registry import parse_scenario
from systems.scenario import ScenarioError
from systems.schema import modeline

TEMPLATES = Path(__file__).resolve().parent / "templates"
SYSTEMS = tuple(sorted(p.stem for p in TEMPLATES.glob("*.yaml")))


def template_text(name: str, system: str, path: Path) -> str:
    if system not in SYSTEMS:
        raise ScenarioError(f"--system takes {', '.join(SYSTEMS)}, not {system!r}")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise ScenarioError(f"a scenario id is letters, digits and . _ -, not {name!r}")
    template = (TEMPLATES / f"{system}.yaml").read_text()
    text = template.format(id=name, path=path, modeline=modeline(path))
    parse_scenario(text, str(path))  # a template that no longer loads is our bug, said here
    return text


def write_template(name: str, system: str, path: Path) -> Path:
    text = template_text(name, system, path)
    if path.exists():
        raise ScenarioError(f"{path} exists: choose another name or --out")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path
