"""No import circles inside the kit: every module's kit imports, top-level or inside a function,
form a graph without cycles. A circle hidden in a function body still couples two modules both
ways (neither can be read or changed alone), so it counts."""

from __future__ import annotations

import ast
from pathlib import Path

KIT = Path(__file__).resolve().parents[1] / "kit"


def _module(path: Path) -> str:
    parts = path.relative_to(KIT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Each kit module -> the kit modules it imports (``from kit import x`` names module x)."""
    modules = {_module(p): p for p in KIT.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for target in targets:
                if target in modules and target != name and target != "kit":
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_the_kit_has_no_import_circles():
    assert cycles(import_graph()) == []


def test_the_circle_finder_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert import_graph()["kit.train"] >= {"kit.defaults", "kit.hardware", "kit.memory"}


def test_the_leaf_modules_import_nothing_of_the_kit():
    """The constants several layers need and the statistics every figure carries sit below
    everything else: importing them pulls in no other part of the kit."""
    graph = import_graph()
    assert graph["kit.defaults"] == set() and graph["kit.stats"] == set()
    assert "kit.stats" in graph["kit.evaluate"]


def test_each_built_in_game_lives_in_its_own_folder():
    """Reading one game's folder teaches how to add one: engine, solver, tool env with its spec,
    and server adapter together, and no part of a game anywhere else in the kit."""
    from kit.registry import BUILTIN

    for game, module in BUILTIN.items():
        folder = KIT / "builtin" / game
        assert module == f"kit.builtin.{game}"
        assert {p.name for p in folder.glob("*.py")} == {
            "__init__.py",
            "engine.py",
            "solver.py",
            "serve.py",
        }
        strays = list(KIT.rglob(f"{game}.py"))
        assert not strays, strays
