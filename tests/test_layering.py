"""The shape of the house, read from the code's own imports (AST, no import executed).

- no import cycle among the modules of ``attneb`` (imports inside functions included);
- no module takes another module's private names (``from m import _x`` or ``m._x``); a private
  module (``_calculus.py``) may be imported by the modules of its own package;
- ``numerics`` and ``theory`` never import each other or ``proofs_check``;
- verify's engine never imports its content (``proofs_check.topics``) statically: it names it
  only as strings (:data:`attneb.proofs_check.engine.content.DEFAULT_CONTENT`).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import attneb
from attneb import numerics, proofs_check, theory
from attneb.proofs_check import engine, topics
from attneb.proofs_check.engine import content

PACKAGES = (theory, numerics, proofs_check)


def _modules() -> dict[str, Path]:
    """Every module of the three packages: dotted name -> file."""
    found = {}
    for package in PACKAGES:
        folder = Path(package.__file__).parent
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((package.__name__, *parts))] = path
    return found


MODULES = _modules()


def _imports(module: str, path: Path | None = None) -> list[tuple[str, str | None, int]]:
    """``(imported module, imported name or None, line)`` for every import of ``module``, resolved to dotted names."""
    path = path or MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(alias.name, None, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            for alias in node.names:
                if f"{base}.{alias.name}" in MODULES:
                    found.append((f"{base}.{alias.name}", None, node.lineno))
                else:
                    found.append((base, alias.name, node.lineno))
    return found


def _graph() -> dict[str, set[str]]:
    graph = {}
    for module in MODULES:
        edges = set()
        for target, _, _ in _imports(module):
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            # a submodule importing its own package's __init__ is not a cycle of concern
            if target and target != module and not module.startswith(target + "."):
                edges.add(target)
        graph[module] = edges
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_the_three_packages_are_found():
    assert {m.rpartition(".")[0] for m in MODULES} >= {theory.__name__, numerics.__name__, engine.__name__}
    assert len(MODULES) > 60


def test_no_import_cycle():
    assert _cycles(_graph()) == []


def test_a_cycle_is_found_where_there_is_one():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _private_uses(module: str, path: Path | None = None) -> list[str]:
    """Private names of other modules that ``module`` (read from ``path``) imports or reads as attributes."""
    path = path or MODULES[module]
    tree = ast.parse(path.read_text())
    own_package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    bad, aliases = [], {}
    for target, name, line in _imports(module, path):
        imported = target if name is None else f"{target}.{name}"
        last = imported.rpartition(".")[2]
        is_private = last.startswith("_") and not last.startswith("__")
        private_module_of_own_package = imported in MODULES and imported.rpartition(".")[0] == own_package
        if is_private and target != module and not private_module_of_own_package:
            bad.append(f"{path.name}:{line} imports {imported}")
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom | ast.Import):
            for alias in node.names:
                aliases[alias.asname or alias.name.split(".")[0]] = alias.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__") \
                and isinstance(node.value, ast.Name) and node.value.id in aliases:
            owner = aliases[node.value.id]
            owner_module = next((m for m in MODULES if m == owner or m.endswith("." + owner)), None)
            if owner_module is not None and owner_module != module:
                bad.append(f"{path.name}:{node.lineno} reads {node.value.id}.{node.attr}")
    return bad


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_takes_another_modules_private_names(module):
    assert _private_uses(module) == []


def test_a_private_name_taken_is_found(tmp_path):
    path = tmp_path / "fake.py"
    path.write_text(f"from {numerics.__name__}.kernels import _prepare\n"
                    f"from {numerics.__name__} import kernels, _accel\n"
                    "kernels._streaming_kernel_sums\n")
    found = _private_uses(f"{proofs_check.__name__}.fake", path)
    assert [f.split(" ", 1)[1] for f in found] == [
        f"imports {numerics.__name__}.kernels._prepare", f"imports {numerics.__name__}._accel",
        "reads kernels._streaming_kernel_sums"]
    assert _private_uses(f"{numerics.__name__}.fake", path)[1:] == found[2:]  # its own package's private module


def test_numerics_and_theory_stand_alone():
    for package, others in ((numerics, (theory, proofs_check)), (theory, (numerics, proofs_check))):
        names = tuple(o.__name__ for o in others)
        for module in (m for m in MODULES if m.startswith(package.__name__)):
            for target, _, line in _imports(module):
                assert not target.startswith(names), f"{module}:{line} imports {target}"


def test_the_engine_never_imports_its_content():
    for module in (m for m in MODULES if m.startswith(engine.__name__ + ".") or m == engine.__name__):
        for target, name, line in _imports(module):
            imported = target if name is None else f"{target}.{name}"
            assert not imported.startswith(topics.__name__), f"{module}:{line} imports {imported}"


def test_the_engine_names_every_topic():
    folder = Path(topics.__file__).parent
    on_disk = {p.stem for p in folder.glob("*.py") if not p.stem.startswith("_") and p.stem != "designs"}
    on_disk |= {p.parent.name for p in folder.glob("*/__init__.py")}
    assert {name.rpartition(".")[2] for name in content.DEFAULT_CONTENT} == on_disk


def test_content_is_named_from_the_package():
    assert all(name.startswith(f"{attneb.__name__}.proofs_check.topics.") for name in content.DEFAULT_CONTENT)
