"""The import layering of the broker and the operator, read from the modules' own source.

Every import statement counts: top-level, function-local and under TYPE_CHECKING (a cycle
hidden there is still a cycle). A module's implicit import of its own parent package (Python
runs `pkg/__init__.py` before `pkg.mod`) is not an edge; `from pkg import x` is.
- The broker has no import cycle at all: `Broker` wires its parts, each constructed with
  what it needs (narrow Protocols next to the consumer, or the owner objects), and none
  imports broker.py back.
- The operator imports the broker's client and error codes, plus the broker modules listed
  below, which issue 23's shared config package replaces: an exact list, a ratchet, so
  that dropping an import updates it and nothing new slips in.
"""
from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BROKER = ROOT / "broker_image"
OPERATOR = ROOT / "operator"

# What the operator may import of rillet: its client and the error codes are meant for it.
OPERATOR_ALLOWED = {"rillet.client", "rillet.client.security", "rillet.protocol",
                    "rillet.protocol.errors"}
OPERATOR_BROKER_IMPORTS = {
    "rillet.config", "rillet.dynamic_config", "rillet.security.acl", "rillet.security.tls",
    "rillet.storage_format", "rillet.topic_config",
}


def modules(root: Path, package: str) -> dict[str, Path]:
    out = {}
    for path in (root / package).rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imported_names(name: str, path: Path) -> Iterator[str]:
    """Every module name an import statement anywhere in the file may refer to."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package[:len(package) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def resolve(candidate: str, known: dict[str, Path]) -> str | None:
    """The known module `candidate` names (`pkg.mod.attr` -> `pkg.mod`), None if outside."""
    while candidate and candidate not in known:
        candidate = candidate.rpartition(".")[0]
    return candidate or None


def import_graph(known: dict[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        targets = {resolve(n, known) for n in imported_names(name, path)}
        graph[name] = {t for t in targets if t is not None and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def test_the_finder_sees_every_kind_of_import(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from typing import TYPE_CHECKING\n"
                              "if TYPE_CHECKING:\n    from .b import B\n")
    (pkg / "b.py").write_text("def f():\n    from pkg import c\n")
    (pkg / "c.py").write_text("import pkg.a\n")
    (pkg / "d.py").write_text("from . import a\n")
    graph = import_graph(modules(tmp_path, "pkg"))
    assert cycles(graph) == [{"pkg.a", "pkg.b", "pkg.c"}]
    assert graph["pkg.d"] == {"pkg", "pkg.a"}


def test_the_broker_has_no_import_cycle() -> None:
    found = cycles(import_graph(modules(BROKER, "rillet")))
    assert found == [], (
        f"import cycles in rillet: {[sorted(c) for c in found]}; none is allowed (a "
        f"TYPE_CHECKING or function-local import that dodges one is one)")


def test_the_operator_imports_no_more_of_the_broker() -> None:
    broker = modules(BROKER, "rillet")
    used: set[str] = set()
    for name, path in modules(OPERATOR, "rillet_operator").items():
        used |= {m for m in (resolve(n, broker) for n in imported_names(name, path))
                 if m is not None}
    assert used - OPERATOR_ALLOWED == OPERATOR_BROKER_IMPORTS, (
        f"the operator imports broker modules {sorted(used - OPERATOR_ALLOWED)}; allowed: the "
        f"client and the error codes, and (until the shared config package) "
        f"{sorted(OPERATOR_BROKER_IMPORTS)}")
