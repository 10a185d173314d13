"""The docs site's reference, generated from the code at build time (mkdocs-gen-files runs this):
the stack file's `trainctl:` keys and the experiment file's fields from their pydantic models,
the CLI from the typer app, and the exit codes from the error hierarchy.

Field descriptions are the docstrings under each field, read here from the source (the models do
not enable use_attribute_docstrings: see infra/spec/model.py)."""

from __future__ import annotations

import ast
import inspect
import sys
import types
from pathlib import Path
from typing import Annotated, Any, Iterator, Literal, NamedTuple, Union, get_args, get_origin

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # mkdocs may run from an environment with another trainctl installed
    sys.path.insert(0, str(REPO))

from pydantic import BaseModel  # noqa: E402
from pydantic.fields import FieldInfo  # noqa: E402
from pydantic_core import PydanticUndefined  # noqa: E402

ERROR_PACKAGES = ("infra", "trainctl", "bootstrap")


class Row(NamedTuple):
    key: str
    type: str
    default: str
    constraints: str
    description: str


def field_docstrings(model: type) -> dict[str, str]:
    """Field name -> the docstring written under it, over the model's classes (base first)."""
    docs: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)) or cls is BaseModel:
            continue
        node = ast.parse(inspect.getsource(cls).strip()).body[0]
        body = node.body if isinstance(node, ast.ClassDef) else []
        for stmt, after in zip(body, body[1:]):
            if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                    and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                    and isinstance(after.value.value, str)):
                docs[stmt.target.id] = " ".join(inspect.cleandoc(after.value.value).split())
    return docs


def nested_model(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds (itself, in an optional or in a tuple), else None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = nested_model(arg)
        if found:
            return found
    return None


def type_name(annotation: Any) -> str:
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return type_name(args[0])
    if origin is Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin in (Union, types.UnionType):
        return " or ".join(type_name(a) for a in args if a is not type(None))
    if origin is tuple:
        return f"list of {type_name(args[0])}" if args else "list"
    if origin is dict:
        return f"mapping of {type_name(args[0])} to {type_name(args[1])}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "mapping"
    return {str: "string", int: "integer", float: "number", bool: "boolean"}.get(
        annotation, getattr(annotation, "__name__", str(annotation)))


def default_of(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.default_factory() if field.default_factory else field.default  # type: ignore[call-arg]
    if value is PydanticUndefined or value is None:
        return "unset"
    if isinstance(value, BaseModel):
        return "see below"
    if isinstance(value, (tuple, list, dict)) and not value:
        return "`[]`" if not isinstance(value, dict) else "`{}`"
    if isinstance(value, tuple):
        value = list(value)
    return f"`{value!r}`".replace("'", '"') if not isinstance(value, bool) else f"`{str(value).lower()}`"


def constraints_of(field: FieldInfo) -> str:
    words = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<", "min_length": "at least", "max_length": "at most",
             "pattern": "matches"}
    out = []
    for meta in field.metadata:
        for attr, word in words.items():
            value = getattr(meta, attr, None)
            if value is not None:
                out.append(f"{word} `{value}`")
    return ", ".join(out)


def holds_many(annotation: Any) -> bool:
    """Whether a field holds a list (tuple[...], possibly optional) rather than one value."""
    return get_origin(annotation) is tuple or any(get_origin(a) is tuple for a in get_args(annotation))


def model_rows(model: type[BaseModel], prefix: str = "") -> Iterator[Row]:
    docs = field_docstrings(model)
    for name, field in model.model_fields.items():
        if field.exclude:  # set by trainctl, not written by users (the experiment's base_dir)
            continue
        key = prefix + name
        nested = nested_model(field.annotation)
        many = holds_many(field.annotation)
        typ = f"mapping (`{key}.*`)" if nested and not many else type_name(field.annotation)
        yield Row(key, typ, default_of(field), constraints_of(field), docs.get(name, ""))
        if nested:
            yield from model_rows(nested, f"{key}[]." if many else f"{key}.")


def cell(text: str) -> str:
    """Text for a table cell: pipes escaped, and `<...>` outside code spans shown, not taken as HTML."""
    if "\\|" in text:  # already escaped (a Literal's choices)
        return text
    parts = text.replace("|", "\\|").replace("\n", " ").split("`")
    return "`".join(p if i % 2 else p.replace("<", "&lt;") for i, p in enumerate(parts))


def table(rows: list[Row], key_prefix: str = "") -> str:
    lines = ["| key | type | default | constraints | description |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| `{key_prefix}{r.key}` | {r.type} | {r.default} | {cell(r.constraints)} "
                     f"| {cell(r.description)} |")
    return "\n".join(lines) + "\n"


def stack_rows() -> list[Row]:
    from infra.spec.cluster import ClusterSpec
    return list(model_rows(ClusterSpec))


def experiment_rows() -> list[Row]:
    from trainctl.jobs.experiment_spec import Experiment
    return list(model_rows(Experiment))


def stack_page() -> str:
    rows = stack_rows()
    top = [r for r in rows if "." not in r.key]
    return ("# Stack file reference\n\n"
            "Generated from `infra/spec/cluster.py` (`ClusterSpec`) and its sections. A stack file "
            "(`stacks/Pulumi.<stack>.yaml`) holds these keys under `config:`, each as `trainctl:<key>`; "
            "nested keys are written as a mapping (`trainctl:ssh: {user: ...}`), lists of mappings as YAML "
            "lists. `gcp:project` and `gcp:zone` are the defaults of `project` and `zone`. An unknown key is "
            "refused (exit 2) with the nearest valid one. See [Write a stack file](../how-to/stack-file.md).\n\n"
            "## Top-level keys\n\n" + table(top, "trainctl:") +
            "\n## Nested keys\n\n" + table([r for r in rows if "." in r.key]))


def experiment_page() -> str:
    return ("# Experiment file reference\n\n"
            "Generated from `trainctl/jobs/experiment_spec.py` (`Experiment`). An experiment file is one "
            "YAML mapping with these keys (`trainctl run exp.yaml`); an unknown key is refused (exit 2) with "
            "the nearest valid one. `overrides` takes the [stack file's keys](stack-file.md) without the "
            "`trainctl:` prefix.\n\n" + table(experiment_rows()))


def cli_commands() -> list[tuple[str, Any]]:
    import typer.main

    from trainctl.cli.entry import app
    group = typer.main.get_command(app)
    return [(name, cmd) for name, cmd in group.commands.items() if not cmd.hidden]  # type: ignore[attr-defined]


def param_row(param: Any, ctx: Any) -> str:
    """One option or argument as `--help` shows it: its names with the value's kind, its help."""
    record = param.get_help_record(ctx)
    names, help_text = record if record else (param.name, "")
    pipe_safe = names.replace("|", "\\|")  # in a code span: escaped for the table, nothing else
    return f"| `{pipe_safe}` | {cell(help_text)} |"


def cli_page() -> str:
    out = ["# CLI reference\n", "Generated from the typer app (`trainctl/cli/entry.py`); "
           "`trainctl COMMAND --help` prints the same. Exit codes: [Exit codes](exit-codes.md).\n"]
    for name, cmd in cli_commands():
        ctx = cmd.context_class(cmd, info_name=name)
        out.append(f"## `trainctl {name}`\n")
        out.append(inspect.cleandoc(cmd.help or "").replace("\b\n", "") + "\n")
        out.append(f"```\ntrainctl {name} {' '.join(cmd.collect_usage_pieces(ctx))}\n```\n")
        params = [p for p in cmd.params if p.name != "help"]
        if params:
            out.append("| option | help |\n|---|---|")
            out.extend(param_row(p, ctx) for p in params)
            out.append("")
    return "\n".join(out)


class ErrorClass(NamedTuple):
    name: str
    module: str
    bases: tuple[str, ...]
    exit_code: int | None
    title: str | None
    doc: str


def error_classes() -> dict[str, ErrorClass]:
    """Every class in the product's packages, by name, read from source (importing them all
    would load Pulumi and the cloud clients)."""
    found: dict[str, ErrorClass] = {}
    for package in ERROR_PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            module = ".".join(path.relative_to(REPO).with_suffix("").parts)
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.ClassDef):
                    continue
                code = next((s.value.value for s in node.body if isinstance(s, ast.Assign)
                             and any(isinstance(t, ast.Name) and t.id == "exit_code" for t in s.targets)
                             and isinstance(s.value, ast.Constant)), None)
                title = next((s.value.value for s in node.body if isinstance(s, ast.Assign)
                              and any(isinstance(t, ast.Name) and t.id == "title" for t in s.targets)
                              and isinstance(s.value, ast.Constant)), None)
                doc = " ".join((ast.get_docstring(node) or "").split())
                bases = tuple(b.id for b in node.bases if isinstance(b, ast.Name))
                found.setdefault(node.name, ErrorClass(node.name, module, bases, code, title, doc))
    return found


class ErrorRow(NamedTuple):
    cls: ErrorClass
    exit_code: int
    headline: str
    depth: int


def error_hierarchy() -> list[ErrorRow]:
    """TrainctlError and every subclass, parents first, with the exit code and the headline the
    CLI prints (trainctl/cli/entry.py: a ConfigError's message alone, after "error:")."""
    classes = error_classes()
    out: list[ErrorRow] = []

    def visit(name: str, inherited: ErrorRow) -> None:
        cls = classes[name]
        code = cls.exit_code if cls.exit_code is not None else inherited.exit_code
        headline = "error:" if name == "ConfigError" else cls.title or inherited.headline
        row = ErrorRow(cls, code, headline, inherited.depth + 1)
        out.append(row)
        for child in sorted(c.name for c in classes.values() if name in c.bases):
            visit(child, row)

    visit("TrainctlError", ErrorRow(classes["TrainctlError"], 1, "failed", -1))
    return out


def exit_codes_page() -> str:
    import infra.errors
    rows = ["| exception | module | exit code | headline | what |", "|---|---|---|---|---|"]
    for row in error_hierarchy():
        indent = "&nbsp;&nbsp;" * (2 * row.depth)
        rows.append(f"| {indent}`{row.cls.name}` | `{row.cls.module}` | {row.exit_code} | {row.headline} "
                    f"| {cell(row.cls.doc)} |")
    return ("# Exit codes\n\nGenerated from the error hierarchy (`infra/errors.py` and its subclasses "
            "across the product); `trainctl/cli/entry.py` turns an exception into its class's exit code.\n\n"
            "```\n" + inspect.cleandoc(infra.errors.__doc__ or "") + "\n```\n\n"
            "A bad option or argument on the command line (click's usage error) exits 2 as well. "
            "Each class below exits with its own code or, without one, its parent's.\n\n" + "\n".join(rows) + "\n")


PAGES = {"reference/stack-file.md": stack_page, "reference/experiment.md": experiment_page,
         "reference/cli.md": cli_page, "reference/exit-codes.md": exit_codes_page}


def write_pages() -> None:
    import mkdocs_gen_files
    for path, page in PAGES.items():
        with mkdocs_gen_files.open(path, "w") as f:
            f.write(page())
        mkdocs_gen_files.set_edit_path(path, "docs/gen_reference.py")


if __name__ == "<run_path>":  # run by mkdocs-gen-files (runpy.run_path); imported by the tests
    write_pages()
