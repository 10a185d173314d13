"""Stack files (stacks/Pulumi.<stack>.yaml) → ClusterSpec.

The same keys feed `pulumi up` (through pulumi.Config) and trainctl (through this file reader),
so there is one config format: `trainctl:<ClusterSpec field>` plus Pulumi's own `gcp:project` /
`gcp:zone` as defaults.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Mapping, get_args

import yaml
from pydantic import BaseModel, ValidationError

from infra.errors import ConfigError as ConfigError  # the name callers import from here
from infra.spec.cluster import ClusterSpec

NAMESPACE = "trainctl"
MAX_CONFIG_BYTES = 1 << 20
# Where trainctl's own code lives (its checkout, or an editable install): the Pulumi program,
# the policy pack, the example stacks.
REPO_ROOT = Path(__file__).resolve().parents[2]
PROJECT_FILE = "Pulumi.yaml"


def project_root(start: Path | None = None) -> Path:
    """The Pulumi project trainctl works in: the nearest directory from the working directory
    up that holds a Pulumi.yaml and a stacks/ folder (as git and pulumi find theirs), else
    trainctl's own checkout. `trainctl init` makes a user's repository such a project."""
    here = (start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        if (directory / PROJECT_FILE).is_file() and (directory / "stacks").is_dir():
            return directory
    return REPO_ROOT


def stack_files_dir() -> Path:
    return project_root() / "stacks"


def suggest(key: str, valid: list[str]) -> str:
    close = difflib.get_close_matches(key, valid, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def keys_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The keys valid at `loc` inside `model` (nested models, tuples and optionals followed)."""
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(str(part))
        if field is None:
            return []
        nested = [t for t in (field.annotation, *get_args(field.annotation), *(
            a for t in get_args(field.annotation) for a in get_args(t)))
            if isinstance(t, type) and issubclass(t, BaseModel)]
        if not nested:
            return []
        model = nested[0]
    return list(model.model_fields)


def format_validation_error(source: str, exc: ValidationError,
                            model: type[BaseModel] | None = None) -> str:
    lines = [f"{source}: invalid configuration"]
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            valid = keys_at(model, err["loc"][:-1]) if model else []
            msg = "unknown key" + suggest(str(err["loc"][-1]), valid)
        got = err.get("input")
        shown = "" if isinstance(got, (dict, list)) or got is None else f" (got {got!r})"
        lines.append(f"  {loc}: {msg}{shown}")
    return "\n".join(lines)


def read_yaml_mapping(path: Path, what: str) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"{what} {path} does not exist")
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise ConfigError(f"{what} {path} is larger than {MAX_CONFIG_BYTES} bytes; refusing to parse it")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return data


def stack_path(stack: str) -> Path:
    candidate = Path(stack)
    if candidate.suffix in (".yaml", ".yml") and candidate.is_file():
        return candidate
    return stack_files_dir() / f"Pulumi.{stack}.yaml"


def stack_name_of(path: Path) -> str:
    name = path.name
    if name.startswith("Pulumi.") and name.endswith(".yaml"):
        return name[len("Pulumi."):-len(".yaml")]
    return path.stem


def available_stacks() -> list[str]:
    return sorted(stack_name_of(p) for p in stack_files_dir().glob("Pulumi.*.yaml"))


def spec_fields(config: Mapping[str, Any], source: str) -> dict[str, Any]:
    """Pick the trainctl:* keys out of a Pulumi config mapping; gcp:project/zone as defaults."""
    valid = list(ClusterSpec.model_fields)
    fields: dict[str, Any] = {}
    for key, value in config.items():
        namespace, _, field = str(key).partition(":")
        if namespace == NAMESPACE:
            if field not in valid:
                raise ConfigError(f"{source}: unknown key {key!r}{suggest(field, valid)}; "
                                  f"valid keys: {', '.join(NAMESPACE + ':' + v for v in valid)}")
            fields[field] = value
        elif namespace == "gcp" and field in ("project", "zone"):
            fields.setdefault(field, value)
    return fields


def build_spec(fields: Mapping[str, Any], source: str) -> ClusterSpec:
    try:
        return ClusterSpec.model_validate(dict(fields))
    except ValidationError as exc:
        raise ConfigError(format_validation_error(source, exc, ClusterSpec)) from None


def load_stack(stack: str, *, name: str | None = None,
               overrides: Mapping[str, Any] | None = None,
               overrides_from: str = "overrides") -> ClusterSpec:
    """The stack file's spec with `overrides` (an experiment's, the command line's) on top; a
    mistake is reported against where it was made: the stack file, or `overrides_from`."""
    path = stack_path(stack)
    if not path.is_file():
        raise ConfigError(f"no stack {stack!r}: {path} does not exist; "
                          f"available: {', '.join(available_stacks()) or 'none'}")
    data = read_yaml_mapping(path, "stack file")
    config = data.get("config") or {}
    if not isinstance(config, dict):
        raise ConfigError(f"{path}: 'config' must be a mapping")
    fields = spec_fields(config, str(path))
    fields.setdefault("name", name or stack_name_of(path))
    if name:
        fields["name"] = name
    if not overrides:
        return build_spec(fields, str(path))
    for key in overrides:
        if key not in ClusterSpec.model_fields:
            raise ConfigError(f"{overrides_from}: override {key!r} is not a cluster field"
                              f"{suggest(key, list(ClusterSpec.model_fields))}")
    merged = {**fields, **overrides}
    if "pools" in overrides and "nodes" not in overrides:
        merged.pop("nodes", None)  # an experiment's pools replace the stack file's node count
    try:
        return ClusterSpec.model_validate(merged)
    except ValidationError as exc:
        build_spec(fields, str(path))  # the stack file's own mistake, if it has one, first
        raise ConfigError(format_validation_error(
            f"{overrides_from}, on stack file {path}", exc, ClusterSpec)) from None


def spec_from_pulumi_config() -> ClusterSpec:
    """Inside a Pulumi program: the same fields, read through pulumi.Config."""
    import json

    import pulumi

    config = pulumi.Config(NAMESPACE)
    fields: dict[str, Any] = {}
    for name in ClusterSpec.model_fields:
        raw = config.get(name)
        if raw is None:
            continue
        try:
            fields[name] = json.loads(raw)  # structured values and numbers/booleans
        except ValueError:
            fields[name] = raw
    gcp_config = pulumi.Config("gcp")
    for name in ("project", "zone"):
        if name not in fields and gcp_config.get(name):
            fields[name] = gcp_config.get(name)
    fields.setdefault("name", pulumi.get_stack())
    return build_spec(fields, f"stack {pulumi.get_stack()}")
