"""Small modules with one job, small functions: no module over 400 lines and no function over 60
(decorators included) in trainctl's own code. The reference trainers are user programs and are
not held to it."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
CHECKED = ("infra", "trainctl", "bootstrap", "policy", "tests", "bench")


def sources() -> list[Path]:
    return [path for top in CHECKED for path in sorted((REPO / top).rglob("*.py"))
            if "data" not in path.relative_to(REPO).parts]


def long_modules() -> set[str]:
    return {str(path.relative_to(REPO)) for path in sources()
            if len(path.read_text().splitlines()) > MAX_MODULE_LINES}


def function_spans(path: Path) -> dict[str, int]:
    """Qualified name (Class.method, outer.inner) -> lines, decorators included."""
    spans: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    first = min([d.lineno for d in child.decorator_list] + [child.lineno])
                    spans[name] = (child.end_lineno or child.lineno) - first + 1
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(path.read_text(), str(path)), "")
    return spans


def long_functions() -> set[str]:
    return {f"{path.relative_to(REPO)}::{name}" for path in sources()
            for name, span in function_spans(path).items() if span > MAX_FUNCTION_LINES}


def test_no_module_is_over_400_lines() -> None:
    assert sorted(long_modules()) == []


def test_no_function_is_over_60_lines() -> None:
    assert sorted(long_functions()) == []


def test_a_function_is_measured_from_its_decorators_to_its_last_line(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("@a\n@b\ndef f():\n    def g():\n        pass\n    return g\n\n\nclass C:\n    def m(self):\n        pass\n")
    assert function_spans(source) == {"f": 6, "f.g": 2, "C.m": 2}
