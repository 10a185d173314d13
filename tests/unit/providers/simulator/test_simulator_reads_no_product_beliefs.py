"""The simulator holds its own facts: no simulator module imports the product's spec (infra.spec: the
catalog, GPU networks, GKE names) or the GCP provider it is the world of. The imports still left are
listed with who removes them; the list may only shrink."""

from __future__ import annotations

import ast

from conftest import REPO

SIMULATOR = REPO / "infra" / "providers" / "gcp" / "simulator"
PRODUCT = ("infra.spec", "infra.providers.gcp")

# module (relative to the simulator) -> product modules it still imports, and why.
LEFT = {
    "apis/compute_quotas.py": {"infra.spec"},  # quota metrics: the d-quota helper's change
    "kubernetes/images.py": {"infra.spec.stack_config"},  # REPO_ROOT, with the bootstrap imports: the lead's
}


def _product_imports(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        modules = ([a.name for a in node.names] if isinstance(node, ast.Import)
                   else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
        names |= {m for m in modules if m.startswith(PRODUCT) and not m.startswith("infra.providers.gcp.simulator")}
    return names


def test_no_simulator_module_imports_the_products_spec_or_provider() -> None:
    found = {}
    for path in sorted(SIMULATOR.rglob("*.py")):
        imports = _product_imports(ast.parse(path.read_text(), str(path)))
        if imports:
            found[path.relative_to(SIMULATOR).as_posix()] = imports
    assert found == LEFT, f"simulator modules importing the product: {found}; expected only {LEFT}"
