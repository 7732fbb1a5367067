"""The house's structure, measured from the imports: every module of det_k8s parsed with `ast`, nothing imported.

An import counts wherever it stands, at module level or inside a function (a function-level import hides a circle
from Python, not from a reader); only the imports under `if TYPE_CHECKING:` do not count, as they never run.

The layers, lowest first, as today's imports order them (each uses only layers below it):

0. `errors`, `quantity`, `stopping`, `scrub_output`, `labels`, `determined`: import nothing of det_k8s. The
   exception hierarchy, Kubernetes quantities, the stop signal, the output scrubber, the label and annotation
   keys, and what a Determined release is (versions, experiment configuration).
1. `safe_read`, `names`, `health`: the safe input reader and the name rules raise `errors`; `health` too.
2. `cluster`, `tools`, `storage`: what a cluster holds (nodes, pods, quotas, DRA) read from API objects; the helm
   and kubectl processes; the checkpoint storage probes. They read inputs safely and validate names.
3. `settings`: the user's settings; it places pods on `cluster`'s nodes (node rules) and reads `determined`.
4. `scheduling`, `chart`: the planner works on `settings` and `cluster`; the chart renders `settings`.
5. `kube`: the API client; it snapshots the cluster into `cluster`'s and `scheduling`'s models and runs `tools`.
6. `release`, `live`: what helm installs, through `kube`, `tools` and `storage`; the live scheduler's runtime,
   through `kube` and `scheduling`.
7. `cli`: the commands, over everything.
8. `__main__`: `python -m det_k8s`.

Modules of one layer do not import each other, so each layer could be read (and tested) knowing only those below.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "det_k8s"

LAYERS: list[set[str]] = [
    {"errors", "quantity", "stopping", "scrub_output", "labels", "determined"},
    {"safe_read", "names", "health"},
    {"cluster", "tools", "storage"},
    {"settings"},
    {"scheduling", "chart"},
    {"kube"},
    {"release", "live"},
    {"cli"},
    {"__main__"},
]

# Imported inside functions so that a command that does not use them does not pay for them. Measured with
# `python -X importtime -c "import X"` (cumulative): kubernetes 340 ms, google.cloud.storage 240 ms,
# azure.storage.blob 290 ms, boto3 160 ms, requests 130 ms, kubernetes_validate 90 ms, ctypes 80 ms,
# jsonschema 70 ms, urllib3 70 ms, referencing 45 ms. Below that, yaml (26 ms) and pydantic (37 ms) load with
# every command anyway.
HEAVY = frozenset({"kubernetes", "kubernetes_validate", "google", "azure", "boto3", "botocore", "requests", "urllib3",
                   "jsonschema", "referencing", "ctypes"})

# Commands are loaded lazily (cli/app.py) and import what they run inside the command function, so that
# `--help` and `--version` stay light: the one package where a function-level import of det_k8s is the rule.
LAZY_PACKAGES = ("det_k8s/cli/",)

KUBE_MAX_LINES = 2_500

# Function-level imports in modules another change is reshaping: none now; an entry here must name one import.
RESHAPING: frozenset[tuple[str, str]] = frozenset()


@dataclass(frozen=True)
class Import:
    importer: str  # dotted module name
    target: str  # dotted module name within det_k8s, or the top-level name of a library
    where: str  # file:line
    in_function: bool
    internal: bool

    def __str__(self) -> str:
        return f"{self.where}: {self.importer} imports {self.target}"


@cache
def modules() -> dict[str, tuple[Path, bool]]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        found[".".join(parts)] = (path, is_package)
    return found


def _base(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


@cache
def imports() -> tuple[Import, ...]:
    found: list[Import] = []
    known = modules()
    for module, (path, is_package) in known.items():
        where = path.relative_to(ROOT).as_posix()

        def visit(node: ast.AST, in_function: bool, module: str = module, is_package: bool = is_package,
                  where: str = where) -> None:
            for child in ast.iter_child_nodes(node):
                if _is_type_checking(child):
                    continue
                inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                if isinstance(child, ast.Import):
                    for alias in child.names:
                        internal = alias.name.split(".")[0] == "det_k8s"
                        target = alias.name if internal else alias.name.split(".")[0]
                        found.append(Import(module, target, f"{where}:{child.lineno}", inner, internal))
                elif isinstance(child, ast.ImportFrom):
                    base = _base(module, is_package, child)
                    if base.split(".")[0] != "det_k8s":
                        found.append(Import(module, base.split(".")[0], f"{where}:{child.lineno}", inner, False))
                        continue
                    for alias in child.names:
                        target = f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                        found.append(Import(module, target, f"{where}:{child.lineno}", inner, True))
                visit(child, inner)

        visit(ast.parse(path.read_text(), str(path)), False)
    return tuple(found)


def internal_edges() -> list[Import]:
    return [i for i in imports() if i.internal and i.target != i.importer and i.target in modules()]


def unit(module: str) -> str:
    """The package a module belongs to (`cluster` for det_k8s.cluster.read), or the top-level module's name."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def components(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
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


def _explain(cycles: list[list[str]], key: Callable[[str], str]) -> str:
    lines = []
    for cycle in cycles:
        members = set(cycle)
        lines.append(" <-> ".join(cycle) + ":")
        lines += dict.fromkeys(f"  {i}" for i in internal_edges()
                               if key(i.importer) != key(i.target) and {key(i.importer), key(i.target)} <= members)
    return "\n".join(lines)


def test_no_circle_among_modules():
    graph: dict[str, set[str]] = defaultdict(set)
    for edge in internal_edges():
        graph[edge.importer].add(edge.target)
    cycles = components(graph)
    assert not cycles, "modules importing each other (move what they share down a floor):\n" + _explain(
        cycles, lambda m: m)


def test_no_circle_among_packages():
    graph: dict[str, set[str]] = defaultdict(set)
    for edge in internal_edges():
        if unit(edge.importer) != unit(edge.target) and unit(edge.target):
            graph[unit(edge.importer)].add(unit(edge.target))
    cycles = components(graph)
    assert not cycles, "packages importing each other:\n" + _explain(cycles, unit)


def test_every_package_and_top_level_module_has_a_layer():
    units = {unit(m) for m in modules()} - {""}
    layered = set().union(*LAYERS)
    assert units - layered == set(), "add these to a layer of LAYERS"
    assert layered - units == set(), "LAYERS names what no longer exists"
    assert sum(len(layer) for layer in LAYERS) == len(layered), "a unit in two layers"


def test_no_import_points_up_or_sideways_a_layer():
    rank = {name: level for level, layer in enumerate(LAYERS) for name in layer}
    wrong = [f"{edge} ({unit(edge.importer)} is layer {rank[unit(edge.importer)]}, "
             f"{unit(edge.target)} layer {rank[unit(edge.target)]})"
             for edge in internal_edges()
             if unit(edge.target) and unit(edge.importer) != unit(edge.target)
             and rank[unit(edge.target)] >= rank[unit(edge.importer)]]
    assert not wrong, "imports that do not point down a layer:\n" + "\n".join(wrong)


def test_only_the_api_client_imports_kubernetes():
    wrong = [str(i) for i in imports() if not i.internal and i.target == "kubernetes" and i.importer != "det_k8s.kube.api"]
    assert not wrong, "the kubernetes client library is det_k8s/kube/api.py's alone:\n" + "\n".join(wrong)


def test_the_api_client_stays_small():
    lines = sum(len(p.read_text().splitlines()) for p in (PACKAGE / "kube").rglob("*.py"))
    assert lines < KUBE_MAX_LINES, f"det_k8s/kube/ has {lines} lines: what is not the API client belongs elsewhere"


def test_function_level_imports_only_where_they_pay():
    wrong = list(dict.fromkeys(str(i) for i in imports()
                               if i.in_function and not i.where.startswith(LAZY_PACKAGES)
                               and (i.internal or i.target not in HEAVY)
                               and (i.importer, i.target) not in RESHAPING))
    assert not wrong, ("a function-level import outside cli/ that is not of a heavy library (HEAVY): move it to the "
                       "top of its module (if that makes a circle, move what the two modules share down a floor):\n"
                       + "\n".join(wrong))
    still = {(i.importer, i.target) for i in imports() if i.in_function}
    assert still >= RESHAPING, f"no longer imported inside a function: drop from RESHAPING {sorted(RESHAPING - still)}"
