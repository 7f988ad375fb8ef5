"""The package graph: packages depend downwards only. Walks every import with ast (module-level
and inside functions alike) and fails on a cycle between top-level packages or on anything
below harness/ importing it."""

from __future__ import annotations

import ast
from collections import defaultdict

from tests.helpers import ROOT

PACKAGES = (
    "contract",
    "faults",
    "nemesis",
    "lazyfs",
    "compose",
    "workloads",
    "systems",
    "checkers",
    "reports",
    "chaos",
    "harness",
    "bench",
)
# What each package may import of ours: the layers, bottom first.
ALLOWED: dict[str, set[str]] = {
    "contract": set(),
    "faults": set(),
    "lazyfs": set(),
    "nemesis": {"contract", "faults"},
    "compose": {"contract", "lazyfs"},
    # The clients: they write the history and know how to reach a broker, nothing of clusters.
    "workloads": {"contract", "compose"},
    "systems": {"contract", "faults", "nemesis", "compose", "lazyfs", "workloads"},
    "checkers": {"contract", "faults"},
    "reports": {"contract", "faults", "checkers"},
    "chaos": {"contract", "faults", "systems"},
    "harness": {
        "contract",
        "faults",
        "nemesis",
        "compose",
        "workloads",
        "systems",
        "checkers",
        "reports",
        "chaos",
    },
    # Benchmarks measure the product from outside it: they may import any of it, and nothing
    # imports them.
    "bench": {
        "contract",
        "faults",
        "nemesis",
        "lazyfs",
        "compose",
        "workloads",
        "systems",
        "checkers",
        "reports",
        "chaos",
        "harness",
    },
}


def imports_of(package: str) -> dict[str, set[str]]:
    """For each module of the package, the top-level packages of ours it imports."""
    out: dict[str, set[str]] = defaultdict(set)
    for path in sorted((ROOT / package).rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in PACKAGES and top != package:
                    out[module].add(top)
    return out


def package_graph() -> dict[str, set[str]]:
    return {p: set().union(*imports_of(p).values()) for p in PACKAGES}


def test_every_package_imports_only_the_layers_below_it() -> None:
    wrong = {
        module: sorted(deps - ALLOWED[package])
        for package in PACKAGES
        for module, deps in imports_of(package).items()
        if deps - ALLOWED[package]
    }
    assert not wrong, f"imports against the layering: {wrong}"


def test_no_cycle_between_top_level_packages() -> None:
    graph = package_graph()

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in graph[start]:
            if nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})):
                return True
        return False

    cycles = [p for p in PACKAGES if reaches(p, p, {p})]
    assert not cycles, f"packages on an import cycle: {cycles} (graph: {graph})"


def test_nothing_below_harness_imports_it() -> None:
    importers = [p for p, deps in package_graph().items() if "harness" in deps]
    assert not importers


def test_nothing_imports_the_benchmarks() -> None:
    importers = [p for p, deps in package_graph().items() if "bench" in deps]
    assert not importers


def test_every_python_package_of_ours_is_in_the_layering() -> None:
    on_disk = {
        p.parent.name
        for p in ROOT.glob("*/__init__.py")
        if p.parent.name not in ("tests",) and not p.parent.name.startswith(".")
    }
    assert on_disk == set(PACKAGES)
