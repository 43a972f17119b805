"""The import layering of the broker and the operator, read from the modules' own source.

Every import statement counts: top-level, function-local and under TYPE_CHECKING (a cycle
hidden there is still a cycle). A module's implicit import of its own parent package (Python
runs `pkg/__init__.py` before `pkg.mod`) is not an edge; `from pkg import x` is.
- the broker has no import cycle at all: `Broker` wires its parts, each constructed with
  what it needs (narrow Protocols next to the consumer, or the owner objects), and none
  imports broker.py back;
- the operator imports of rillet only the shared definitions (rillet.defs), the client and
  the error codes; the shared definitions and the client import nothing of the broker's
  runtime (rillet.defs only itself and the standard library), so the operator's image needs
  no more of the broker than those.
"""
from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BROKER = ROOT / "broker_image"
OPERATOR = ROOT / "operator"

SHARED = "rillet.defs"
# What the operator may import of rillet, exactly: its client and the error codes are meant
# for it, and the shared definitions (every module of rillet.defs is allowed, not required).
OPERATOR_IMPORTS = {"rillet.client", "rillet.client.quotas", "rillet.client.security",
                    "rillet.protocol", "rillet.protocol.errors"}
# What the client and the protocol package may reach of the rest of rillet: the shared
# definitions (ACL and SASL names), so the operator's image needs nothing else of the broker.
CLIENT_PACKAGES = ("rillet.client", "rillet.protocol")


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


def in_package(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_operator_imports_only_the_shared_definitions_the_client_and_errors() -> None:
    broker = modules(BROKER, "rillet")
    used: set[str] = set()
    for name, path in modules(OPERATOR, "rillet_operator").items():
        used |= {m for m in (resolve(n, broker) for n in imported_names(name, path))
                 if m is not None}
    shared = {m for m in used if in_package(m, SHARED)}
    assert shared, "the operator no longer uses rillet.defs: is the finder still right?"
    assert used - shared == OPERATOR_IMPORTS, (
        f"the operator imports {sorted(used - shared)} of rillet besides rillet.defs; allowed "
        f"exactly: {sorted(OPERATOR_IMPORTS)}")


def test_the_shared_definitions_import_only_themselves_and_the_standard_library() -> None:
    known = modules(BROKER, "rillet")
    outside: dict[str, set[str]] = {}
    for name, path in known.items():
        if not in_package(name, SHARED):
            continue
        for imported in imported_names(name, path):
            top = imported.split(".")[0]
            inside = in_package(resolve(imported, known) or "", SHARED) or imported == "rillet"
            if not inside and (top == "rillet" or top not in sys.stdlib_module_names):
                outside.setdefault(name, set()).add(imported)
    assert outside == {}, f"rillet.defs must be pure (stdlib and itself only): {outside}"


def test_the_client_and_protocol_reach_no_broker_runtime() -> None:
    known = modules(BROKER, "rillet")
    reached: dict[str, set[str]] = {}
    for name, path in known.items():
        if not any(in_package(name, p) for p in CLIENT_PACKAGES):
            continue
        for target in {resolve(n, known) for n in imported_names(name, path)} - {None}:
            if target != "rillet" and not any(in_package(target, p)
                                              for p in (*CLIENT_PACKAGES, SHARED)):
                reached.setdefault(name, set()).add(target)
    assert reached == {}, f"the client and protocol import broker modules: {reached}"


# What raft imports of rillet outside itself, exactly: the wire error codes, the client's
# connection (its RPC transport) and the fsync helper for the quorum-state file. Its log, the
# topic its RPCs name and the voters' addresses are given to it, so it knows nothing of
# metadata, the controller or the broker's config.
RAFT_IMPORTS = {"rillet.client.connection", "rillet.protocol", "rillet.protocol.errors",
                "rillet.storage.durable_file"}
# ... and all that reaches in turn: the client's and the protocol's own imports included.
RAFT_MAY_REACH = ("rillet.raft", *CLIENT_PACKAGES, SHARED, "rillet.storage.durable_file")


def test_raft_knows_nothing_of_metadata_or_the_broker() -> None:
    graph = import_graph(modules(BROKER, "rillet"))
    raft = {name for name in graph if in_package(name, "rillet.raft")}
    direct = {target for name in raft for target in graph[name]} - raft
    assert direct == RAFT_IMPORTS, (
        f"rillet.raft imports {sorted(direct)} outside itself; allowed exactly "
        f"{sorted(RAFT_IMPORTS)} (pass anything else in as a parameter)")
    reached, todo = set(), sorted(raft)
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo.extend(graph[name])
    beyond = {n for n in reached if not any(in_package(n, p) for p in RAFT_MAY_REACH)}
    assert not beyond, f"rillet.raft reaches {sorted(beyond)} through what it imports"
