"""The package is built in layers (docs/layout.md): no module imports a higher layer, and the code a saved
analysis is keyed on covers everything the analyses import."""

from __future__ import annotations

import ast
from pathlib import Path

from assign_add.analysis.suite import ANALYSIS_CODE

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "assign_add"

# lowest first; a unit is a subpackage or a root module of assign_add
LAYERS: list[set[str]] = [
    {"__init__", "io", "lock", "stats", "charts", "machine", "config", "provenance", "parallel"},
    {"task"},
    {"model"},
    {"run"},
    {"train", "interop", "answers"},
    {"analysis"},
    {"studies", "sweep", "explore"},
    {"report"},
    {"reproduce", "bench"},
    {"cli"},
]
LEVEL = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}


def unit_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def imported_units(path: Path) -> set[str]:
    """The assign_add units a file imports, at module level or inside functions."""
    units = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "assign_add":
            parts = node.module.split(".")
            units |= {a.name for a in node.names} if len(parts) == 1 else {parts[1]}
        elif isinstance(node, ast.Import):
            units |= {a.name.split(".")[1] for a in node.names if a.name.startswith("assign_add.")}
    return units


def graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        edges.setdefault(unit_of(path), set()).update(imported_units(path))
    return edges


def test_every_unit_has_a_layer():
    assert set(graph()) <= set(LEVEL), f"units without a layer: {sorted(set(graph()) - set(LEVEL))}"


def test_no_module_imports_a_higher_layer():
    upward = sorted(f"{src} → {dst}" for src, dsts in graph().items() for dst in dsts
                    if dst in LEVEL and LEVEL[dst] > LEVEL[src])
    assert not upward, f"imports of a higher layer: {upward}"


def test_the_layer_check_sees_an_upward_import(tmp_path):
    """The check is not vacuous: a function-level import of the report from the analyses is found."""
    planted = tmp_path / "x.py"
    planted.write_text("def f():\n    from assign_add.report.claims import CLAIMS\n")
    assert imported_units(planted) == {"report"} and LEVEL["report"] > LEVEL["analysis"]


def test_the_analysis_key_covers_every_unit_the_analyses_import():
    edges, seen, todo = graph(), set(), ["analysis"]
    while todo:
        unit = todo.pop()
        if unit not in seen:
            seen.add(unit)
            todo += sorted(edges.get(unit, set()))
    named = {u.removesuffix(".py") for u in ANALYSIS_CODE}
    assert seen <= named, f"imported by the analyses but not in ANALYSIS_CODE: {sorted(seen - named)}"
