"""The tree shows the architecture: every module imports only its own layer and those below it,
no two modules import each other (directly or round a loop), and nothing outside infra/providers/
reaches into one provider's package: callers go through the registry and ask its Capabilities.
The GCP simulator (gcpsim/) is a project of its own: it imports nothing of the product, and the
product reaches it only through the `--simulate` convenience. Both build on namespace_nodes/, the
node machinery below everything.

Imports are read with ast from every module, those inside functions included (a lazy import is
still a dependency); those under `if TYPE_CHECKING:` count for the direction, not for loops (they
never run)."""

from __future__ import annotations

import ast
import functools
from collections import defaultdict
from pathlib import Path

from conftest import REPO

# Lowest first. A module belongs to the layer of its longest matching prefix.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("namespace_nodes",),  # netns, sshd, the metadata server, SSH keys: the local stack's and gcpsim's
    ("infra.errors", "infra.retry"),  # the one error hierarchy and retry policy: every layer uses them
    ("infra.spec",),  # typed inputs: catalog, ClusterSpec, stack files, cost, job runtimes
    ("policy",),  # GCP's documented constraints, read by the GCP provider
    ("infra.providers", "infra.__main__"),  # realizers, inventory, local/, gcp/ (the old entry point's shim)
    ("bootstrap",),
    ("trainctl.launchers",),
    ("trainctl.jobs",),
    ("trainctl.cli",),
)
PROVIDER_PACKAGES = ("infra.providers.local", "infra.providers.gcp")
# Modules outside infra/providers/ that may name a provider's package, and why.
PROVIDER_DOORS = {
    # Projects that `trainctl init` wrote before the program moved import this module.
    "infra.__main__": "infra.providers.gcp.program.__main__",
}
# Launchers beside each other: what both need lives in trainctl.launchers itself.
SIBLINGS = ("trainctl.launchers.ssh", "trainctl.launchers.gke")
# Upward imports that remain, each with its reason. This list only ever shrinks.
ALLOWED_UPWARD: dict[tuple[str, str], str] = {}
SIMULATOR = "gcpsim"
# What the simulator may import: itself and the node machinery.
SIMULATOR_BASE = (SIMULATOR, "namespace_nodes")
# Product modules that may start the simulator: the `--simulate` convenience.
SIMULATOR_DOORS = ("infra.providers.simulated_project",)
# Product modules the simulator still imports, each with its reason. This list only ever shrinks.
SIMULATOR_USES_OF_THE_PRODUCT: dict[tuple[str, str], str] = {
}
TOPS = ("infra", "trainctl", "bootstrap", "policy", "namespace_nodes", "gcpsim")


def modules() -> dict[str, Path]:
    found = {}
    for top in TOPS:
        for path in sorted((REPO / top).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def type_checking_only(tree: ast.Module) -> set[int]:
    """ids of the import nodes under `if TYPE_CHECKING:`."""
    return {id(inner) for node in ast.walk(tree) if isinstance(node, ast.If)
            and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
            for stmt in node.body for inner in ast.walk(stmt)}


@functools.cache
def import_graphs() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """module -> the project modules it imports (a name imported from a module is that module;
    `from package import submodule` is the submodule): every import, and those that run (without
    the ones only the type checker sees, for loops). Each module is parsed once, when a test first
    asks: at collection every test worker would parse the whole tree."""
    known = modules()
    graph: dict[str, set[str]] = defaultdict(set)
    runtime: dict[str, set[str]] = defaultdict(set)
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(), str(path))
        skipped = type_checking_only(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
            else:
                continue
            for target in targets:
                while target and target not in known:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
                    if id(node) not in skipped:
                        runtime[name].add(target)
    return graph, runtime


def all_imports() -> dict[str, set[str]]:
    return import_graphs()[0]


def runtime_imports() -> dict[str, set[str]]:
    return import_graphs()[1]


def layer(module: str) -> int | None:
    best: tuple[int, int] | None = None
    for rank, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[1]:
                    best = (rank, len(prefix))
    return best[0] if best else None


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_every_module_belongs_to_a_layer() -> None:
    # the top packages themselves (`infra`, `trainctl`) hold nothing but a docstring; the
    # simulator is no layer of the product
    assert sorted(m for m in modules() if layer(m) is None and not within(m, SIMULATOR)) == ["infra", "trainctl"]


def test_the_simulator_imports_nothing_of_the_product() -> None:
    reaching = sorted(f"{a} -> {b}" for a, targets in all_imports().items() if within(a, SIMULATOR)
                      for b in targets if not any(within(b, base) for base in SIMULATOR_BASE)
                      and (a, b) not in SIMULATOR_USES_OF_THE_PRODUCT)
    assert reaching == []


def test_the_node_machinery_imports_only_itself() -> None:
    reaching = sorted(f"{a} -> {b}" for a, targets in all_imports().items() if within(a, "namespace_nodes")
                      for b in targets if not within(b, "namespace_nodes"))
    assert reaching == []


def test_the_product_reaches_the_simulator_only_through_simulate() -> None:
    reaching = sorted(f"{a} -> {b}" for a, targets in all_imports().items() if not within(a, SIMULATOR)
                      for b in targets if within(b, SIMULATOR) and a not in SIMULATOR_DOORS)
    assert reaching == []


def test_the_simulator_s_remaining_uses_of_the_product_still_exist() -> None:
    """An exception whose import is gone leaves the list: it only shrinks."""
    assert [pair for pair in SIMULATOR_USES_OF_THE_PRODUCT
            if pair[1] not in all_imports().get(pair[0], set())] == []


def test_no_module_imports_a_layer_above_its_own() -> None:
    upward = sorted(f"{a} -> {b}" for a, targets in all_imports().items() for b in targets
                    if layer(a) is not None and layer(b) is not None and layer(b) > layer(a)  # type: ignore[operator]
                    and (a, b) not in ALLOWED_UPWARD)
    assert upward == []


def test_the_allowed_upward_imports_still_exist() -> None:
    """An exception whose import is gone leaves the list: it only shrinks."""
    assert [pair for pair in ALLOWED_UPWARD if pair[1] not in all_imports().get(pair[0], set())] == []


def test_no_import_outside_the_providers_reaches_into_one_provider() -> None:
    reaching = sorted(f"{a} -> {b}" for a, targets in all_imports().items() for b in targets
                      if not within(a, "infra.providers") and any(within(b, p) for p in PROVIDER_PACKAGES)
                      and PROVIDER_DOORS.get(a) != b)
    assert reaching == []


def test_one_provider_never_imports_the_other() -> None:
    crossing = sorted(f"{a} -> {b}" for a, targets in all_imports().items() for b in targets
                      if (within(a, "infra.providers.local") and within(b, "infra.providers.gcp"))
                      or (within(a, "infra.providers.gcp") and within(b, "infra.providers.local")))
    assert crossing == []


def test_the_ssh_and_gke_launchers_never_import_each_other() -> None:
    crossing = sorted(f"{a} -> {b}" for a, targets in all_imports().items() for b in targets
                      for mine, other in (SIBLINGS, SIBLINGS[::-1]) if within(a, mine) and within(b, other))
    assert crossing == []


def test_no_modules_import_each_other_round_a_loop() -> None:
    assert cycles(runtime_imports()) == []


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
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
    return sorted(found)


def test_the_loop_finder_finds_a_loop_and_passes_a_tree() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []
