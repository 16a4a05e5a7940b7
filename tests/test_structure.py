"""The package's modules import each other without cycles.

Imports under ``TYPE_CHECKING`` count too: a cycle there is still two modules
that cannot be understood one without the other, and the next runtime import
along it breaks at load time.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).parent.parent / "custom_components" / "ha_personal_assistant"
NAME = "ha_personal_assistant"


def _module_name(path: Path, root: Path) -> str:
    parts = [NAME, *path.relative_to(root).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(current: str, is_package: bool, level: int, module: str | None) -> str:
    base = current.split(".")
    if not is_package:
        base.pop()
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def import_graph(root: Path) -> dict[str, set[str]]:
    """Return module -> the package's modules it imports (any import statement)."""
    files = {_module_name(path, root): path for path in root.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    target = _resolve(name, is_package, node.level, node.module)
                else:
                    target = (node.module or "").removeprefix("custom_components.")
                # "from .store import turns" names a module, not a symbol.
                targets = [
                    f"{target}.{alias.name}"
                    if f"{target}.{alias.name}" in files
                    else target
                    for alias in node.names
                ]
            elif isinstance(node, ast.Import):
                targets = [
                    alias.name.removeprefix("custom_components.")
                    for alias in node.names
                ]
            graph[name].update(
                target for target in targets if target in files and target != name
            )
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Return the strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_package_has_no_import_cycle() -> None:
    """No two modules of the integration import each other, directly or around."""
    graph = import_graph(PACKAGE)
    assert len(graph) > 40
    # The graph is read right: known edges, relative and "from . import x" forms.
    assert f"{NAME}.assistant" in graph[f"{NAME}.runtime"]
    assert f"{NAME}.store.turns" in graph[f"{NAME}.sessions"]
    assert f"{NAME}.store.database" in graph[f"{NAME}.store.checkpoints"]
    assert cycles(graph) == []


def test_the_cycle_check_finds_a_cycle(tmp_path: Path) -> None:
    """The check itself fails on a loop through TYPE_CHECKING and "from . import"."""
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "__init__.py").write_text("")
    (tmp_path / "a.py").write_text("from .store import b\n")
    (tmp_path / "store" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..c import C\n"
    )
    (tmp_path / "c.py").write_text("from . import a\n")
    (tmp_path / "d.py").write_text("from .a import x\n")
    assert cycles(import_graph(tmp_path)) == [
        [f"{NAME}.a", f"{NAME}.c", f"{NAME}.store.b"]
    ]
