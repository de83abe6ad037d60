"""The structure goals, counted (issue 36), ``if TYPE_CHECKING:`` imports included:

- import cycles among modules (strongly connected parts of the module graph);
- import cycles among packages: siblings in one package (each with everything under
  it) importing each other round, at least one of them a package (two modules of one
  package importing each other are a module cycle already);
- modules importing ``<package>.app`` besides the app itself, ``__main__`` and ``check``
  (adapters receive narrow interfaces, not the composition root);
- modules over 600 lines (the message catalogue, ``core/i18n.py``, aside).

Prints the figures and what makes them, and exits 1 when one is above its goal (all
are 0). ``python scripts/structure.py [package]``: ``kernel`` by default; the package is
imported from the current directory (or ``PYTHONPATH``).
"""

from __future__ import annotations

import importlib.util
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path

import grimp

MAX_LINES = 600
SIZE_EXEMPT = ("core/i18n.py",)  # the catalogue: both languages, key by key
APP_IMPORTERS = ("app", "__main__", "check")  # may import <package>.app


def strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Tarjan's components of more than one node, each sorted, iteratively (the graph
    may be deeper than Python's recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            child = next(edges, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                part = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    part.append(member)
                    if member == node:
                        break
                if len(part) > 1:
                    found.append(sorted(part))
    return found


def module_graph(package: str) -> dict[str, set[str]]:
    graph = grimp.build_graph(package, exclude_type_checking_imports=False, cache_dir=None)
    return {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}


def package_cycles(modules: Mapping[str, set[str]]) -> list[list[str]]:
    """Cycles among the children of each package, each child standing for its subtree;
    only those with a package among them."""
    packages = {m.rsplit(".", 1)[0] for m in modules if "." in m}
    found = []
    for parent in sorted(packages):
        depth = parent.count(".") + 1

        def child(module: str, parent: str = parent, depth: int = depth) -> str | None:
            inside = module.startswith(parent + ".")
            return ".".join(module.split(".")[: depth + 1]) if inside else None

        siblings: dict[str, set[str]] = defaultdict(set)
        for module, imported in modules.items():
            source = child(module)
            if source is None:
                continue
            siblings[source]
            for target in map(child, imported):
                if target is not None and target != source:
                    siblings[source].add(target)
        for part in strongly_connected(siblings):
            if any(name in packages for name in part):
                found.append(part)
    return found


def app_importers(package: str, modules: Mapping[str, set[str]]) -> list[str]:
    app = f"{package}.app"
    allowed = {f"{package}.{name}" for name in APP_IMPORTERS}
    return sorted(m for m, imported in modules.items() if app in imported and m not in allowed)


def oversized(package: str) -> list[tuple[str, int]]:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"{package}: not an importable package")
    root = Path(next(iter(spec.submodule_search_locations)))
    found = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if relative in SIZE_EXEMPT:
            continue
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES:
            found.append((f"{package}/{relative}", lines))
    return found


def main(argv: list[str]) -> int:
    package = argv[0] if argv else "kernel"
    sys.path.insert(0, str(Path.cwd()))
    modules = module_graph(package)
    module_parts = strongly_connected(modules)
    package_parts = package_cycles(modules)
    importers = app_importers(package, modules)
    big = oversized(package)
    figures = [
        ("module cycles", len(module_parts), [" ".join(p) for p in module_parts]),
        ("package cycles", len(package_parts), [" ".join(p) for p in package_parts]),
        (f"modules importing {package}.app", len(importers), importers),
        (f"modules over {MAX_LINES} lines", len(big), [f"{p} {n}" for p, n in big]),
    ]
    print(f"structure of {package} (TYPE_CHECKING imports counted; every goal is 0):")
    for name, count, details in figures:
        print(f"  {name}: {count}")
        for detail in details:
            print(f"    {detail}")
    failed = [name for name, count, _ in figures if count > 0]
    if failed:
        print("structure: above the goal: " + ", ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
