"""The project's modules import without a cycle.

Every module of kafkalog_tools is imported (each must load on its own), and the graph of which
module imports which is read from the sources with `ast` and checked for cycles. Every import
statement counts, those inside functions too: an import inside a function is fine for loading
something late (numpy, numba, a subcommand), but not as a way to hide a cycle, which is still a
cycle in the design (module A needs B needs A). Implicit edges are not counted: importing
`a.b.c` runs the package `a.b`'s __init__, but a package re-exporting its parts is not a cycle
with them. Names loaded through `importlib.import_module` (the CLI's subcommands, codecs and
payload decoders, by name) are not seen; those point down, from a registry to its entries.
"""
from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import kafkalog_tools

PACKAGE = "kafkalog_tools"
ROOT = Path(kafkalog_tools.__file__).parent


def project_modules() -> dict[str, Path]:
    """Every module of the package by dotted name, with its source (a package by its __init__)."""
    modules = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = (PACKAGE, *path.relative_to(ROOT).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def imported_by(name: str, source: str, is_package: bool, modules: dict[str, Path]) -> set[str]:
    """The project's modules that the module `name` imports, anywhere in its source: each import
    resolved to the deepest project module it names (`from .x import y` is x.y where y is a
    module, else x)."""
    package = name if is_package else name.rpartition(".")[0]
    named = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            named.update(f"{module}.{alias.name}" if f"{module}.{alias.name}" in modules else module
                         for alias in node.names)
    found = set()
    for target in named:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: imported_by(name, path.read_text(encoding="utf-8"), path.name == "__init__.py", modules)
            for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_every_module_imports():
    names = [info.name for info in pkgutil.walk_packages([str(ROOT)], prefix=f"{PACKAGE}.")
             if not info.name.endswith("__main__")]  # (`python -m`'s entry points run their command)
    assert set(names) | {PACKAGE} == {name for name in project_modules() if not name.endswith("__main__")}
    for name in names:
        importlib.import_module(name)


def test_no_import_cycle():
    graph = import_graph()
    assert f"{PACKAGE}.dump" in graph[f"{PACKAGE}.commands.dump"]  # the graph sees imports at all
    assert cycles(graph) == []


def test_the_cycle_check_finds_cycles():
    """Cycles of two and three modules, and one closed by an import inside a function."""
    modules = {f"{PACKAGE}.{name}": Path() for name in ("a", "b", "c", "d")}
    graph = {name: imported_by(name, source, False, modules) for name, source in {
        f"{PACKAGE}.a": "from . import b\n",
        f"{PACKAGE}.b": "from .c import thing\n",
        f"{PACKAGE}.c": "def late():\n    from .a import other\n",
        f"{PACKAGE}.d": "import kafkalog_tools.d\nimport os\n",
    }.items()}
    assert cycles(graph) == [[f"{PACKAGE}.a", f"{PACKAGE}.b", f"{PACKAGE}.c"]]
    graph[f"{PACKAGE}.c"] = set()
    assert cycles(graph) == []


CLI_USERS = {"__main__", "manpages", "fuzz.runner", "spark.submit"}
"""Modules that run or describe the command line itself: the entry point, the man pages, the fuzzer
(which runs every subcommand) and spark-submit's driver (which runs one)."""


def test_the_library_does_not_import_the_command_line():
    """Two layers: `commands/` (click) over the library; no library module reaches up into them."""
    cli = {f"{PACKAGE}.cli"} | {name for name in project_modules() if name.startswith(f"{PACKAGE}.commands")}
    library = set(project_modules()) - cli - {f"{PACKAGE}.{name}" for name in CLI_USERS}
    assert {name: sorted(imports & cli) for name, imports in import_graph().items()
            if name in library and imports & cli} == {}
