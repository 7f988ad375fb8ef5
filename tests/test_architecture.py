"""The package graph: packages depend downwards only. Walks every import with ast (module-level
and inside functions alike) and fails on a cycle between top-level packages, on anything
below harness/ importing it, or on a cycle between modules (inside one package too)."""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Collection, Mapping
from pathlib import Path

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
    "bench": set(PACKAGES) - {"bench"},
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
    # The benchmarks measure the product from outside it (ALLOWED), harness included.
    importers = [p for p, deps in package_graph().items() if "harness" in deps and p != "bench"]
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


# The checker in two rooms and a door: the engine (checkers/engine/: a Spark session and its
# JVM, their tuning, profiling and warm-up) and the analyses beside it in checkers/, which, like
# every other package, use the engine only through the names checkers.engine exports.
ENGINE = "checkers.engine"


def _is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def modules_imported(path: Path) -> dict[str, set[str]]:
    """Each module of ours the file imports (module level and inside functions alike), with the
    names it takes from it: `from a import b` is a.b when that is a module, else b of a."""
    out: dict[str, set[str]] = defaultdict(set)
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                out[alias.name]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                if _is_module(sub):
                    out[sub]
                else:
                    out[node.module].add(alias.name)
    return {m: names for m, names in out.items() if m.split(".")[0] in PACKAGES}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _engine_surface() -> set[str]:
    init = ROOT / "checkers" / "engine" / "__init__.py"
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "__all__":
            return set(ast.literal_eval(node.value))
    raise AssertionError("checkers/engine/__init__.py names no __all__")


def _in_engine(module: str) -> bool:
    return module == ENGINE or module.startswith(ENGINE + ".")


def test_the_engine_imports_nothing_of_the_analyses() -> None:
    wrong = {
        _module_name(path): sorted(
            m for m in modules_imported(path) if m.startswith("checkers") and not _in_engine(m)
        )
        for path in sorted((ROOT / "checkers" / "engine").rglob("*.py"))
    }
    assert not {m: deps for m, deps in wrong.items() if deps}


def test_outside_the_engine_only_its_public_names_are_imported() -> None:
    """Not a module of the engine, and only what checkers.engine's __all__ names (tests of the
    engine's own modules may look inside it)."""
    surface = _engine_surface()
    wrong: dict[str, list[str]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = _module_name(path)
            if _in_engine(module):
                continue
            for imported, names in modules_imported(path).items():
                if imported.startswith(ENGINE + "."):
                    wrong.setdefault(module, []).append(imported)
                elif imported == ENGINE:
                    wrong.setdefault(module, []).extend(sorted(names - surface))
    assert not {m: names for m, names in wrong.items() if names}


def test_no_name_the_engine_exports_hides_one_of_its_modules() -> None:
    """`from checkers.engine import together` must not be a function in one place and a module
    in another."""
    modules = {p.stem for p in (ROOT / "checkers" / "engine").glob("*.py")}
    assert not _engine_surface() & modules


def test_no_import_cycle_between_the_checkers_modules() -> None:
    """Not even through an import inside a function: the checker's modules depend downwards."""
    graph = {
        _module_name(path): {m for m in modules_imported(path) if m.startswith("checkers")}
        for path in sorted((ROOT / "checkers").rglob("*.py"))
    }

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in graph.get(start, ()):
            if nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})):
                return True
        return False

    cycles = sorted(m for m in graph if reaches(m, m, {m}))
    assert not cycles, f"checkers modules on an import cycle: {cycles}"


# ---- modules ---------------------------------------------------------------------------------

# Packages left out of the module cycle test: none since the checker's engine stands apart.
NOT_YET_ACYCLIC: tuple[str, ...] = ()


def our_modules() -> dict[str, Path]:
    """Every module of our packages by dotted name (a package by its __init__.py)."""
    modules = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def imported_modules(
    module: str, is_package: bool, tree: ast.AST, known: Collection[str]
) -> set[str]:
    """The modules of `known` that `module` imports anywhere (at the top, inside functions,
    under TYPE_CHECKING): `import a.b` names a.b, `from a.b import c` names a.b.c when that is a
    module and a.b otherwise, and a relative import is resolved from `module`'s package."""
    here = module.split(".") if is_package else module.split(".")[:-1]
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            names += [f"{source}.{a.name}" for a in node.names]
    found = set()
    for name in names:
        while name and name not in known:  # a name imported from a module: the module
            name = name.rpartition(".")[0]
        if name and name != module:
            found.add(name)
    return found


def module_graph() -> dict[str, set[str]]:
    """Each module of ours (but NOT_YET_ACYCLIC's) with the modules of ours it imports."""
    modules = our_modules()
    graph = {}
    for module, path in modules.items():
        if module.split(".")[0] in NOT_YET_ACYCLIC:
            continue
        tree = ast.parse(path.read_text(), str(path))
        deps = imported_modules(module, path.name == "__init__.py", tree, modules)
        graph[module] = {d for d in deps if d.split(".")[0] not in NOT_YET_ACYCLIC}
    return graph


def cycles(graph: Mapping[str, Collection[str]]) -> list[list[str]]:
    """The graph's strongly connected components of more than one node (Tarjan's), each sorted:
    every module on an import cycle, grouped by the cycle it is on."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_the_module_graph_resolves_every_kind_of_import() -> None:
    known = {"p", "p.a", "p.b", "p.sub", "p.sub.c", "q"}
    source = (
        "import q\n"
        "from p import b\n"
        "from p.sub.c import NAME\n"
        "def f():\n"
        "    from . import a\n"
        "    from .sub import c as other\n"
        "    import os\n"
    )
    tree = ast.parse(source)
    assert imported_modules("p.x", False, tree, known) == {"q", "p.b", "p.sub.c", "p.a"}
    assert imported_modules(
        "p.sub", True, ast.parse("from .. import a\nfrom . import c"), known
    ) == {
        "p.a",
        "p.sub.c",
    }


def test_the_cycle_finder_names_every_module_on_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e", "d"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_module_graph_sees_our_imports() -> None:
    graph = module_graph()
    assert "harness.cli" in graph["harness.reference"]
    assert "workloads.kafka.base" in graph["workloads.kafka.copier"]
    assert "checkers.engine" in graph["checkers.run"]


def test_no_import_cycle_between_modules() -> None:
    """No import cycle between modules, module-level or inside functions: a piece two modules
    share goes down into a module both import."""
    found = cycles(module_graph())
    assert not found, "modules on an import cycle, a cycle a line:\n" + "\n".join(
        ", ".join(c) for c in found
    )
