"""Resource properties as the engine sees them: the SDK's wire form (a protobuf Struct with
Pulumi's "special signature" objects for secrets, assets and archives), the plain values a
provider works on, property paths (ignore_changes, replace_on_changes) and the comparison that
decides whether a declared value differs from the recorded state.

The signatures are Pulumi's own constants (pulumi/runtime/rpc.py: _special_sig_key and the
secret/asset/archive signatures), so values pass between the Python SDK and this engine
exactly as they pass through the real engine's gRPC monitor.
"""

from __future__ import annotations

import copy
import re
from typing import Any, Callable, Iterator

from google.protobuf import json_format, struct_pb2

SIG = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
ASSET_SIG = "c44067f5952c0a294b673a41bacd8c17"
ARCHIVE_SIG = "0def7320c3a5731c473e5ecbe6d01bc7"
RESOURCE_SIG = "5cf8f73096256a8f31e491e813e4eb8e"


def from_struct(struct: struct_pb2.Struct) -> dict[str, Any]:
    """Struct has only doubles: whole numbers come back as the integers the program gave."""
    return _whole_floats_as_ints(json_format.MessageToDict(struct))


def to_struct(values: dict[str, Any]) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    json_format.ParseDict(values, struct)
    return struct


def _whole_floats_as_ints(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _whole_floats_as_ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole_floats_as_ints(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def is_secret(value: Any) -> bool:
    return isinstance(value, dict) and value.get(SIG) == SECRET_SIG


def secret(value: Any) -> dict[str, Any]:
    return value if is_secret(value) else {SIG: SECRET_SIG, "value": value}


def plain(value: Any) -> Any:
    """The value with secrets unwrapped (assets and archives as they are)."""
    if is_secret(value):
        return plain(value.get("value"))
    if isinstance(value, dict):
        if value.get(SIG) in (ASSET_SIG, ARCHIVE_SIG):
            return value  # providers read assets and archives themselves
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def secret_keys(values: dict[str, Any]) -> set[str]:
    return {k for k, v in values.items() if is_secret(v)}


def wrap_secrets(outputs: dict[str, Any], keys: set[str]) -> dict[str, Any]:
    """Outputs whose inputs were secret stay secret (the engine's rule for provider outputs)."""
    return {k: secret(v) if k in keys else v for k, v in outputs.items()}


# --- property paths ---------------------------------------------------------------------------

_SEGMENT = re.compile(r'\.?([A-Za-z_$][\w$-]*|\*)|\[(\d+|\*)\]|\["((?:[^"\\]|\\.)*)"\]')


def parse_path(path: str) -> list[str | int]:
    """`labels["trainctl-expires"]`, `nodeConfig.resourceLabels["x"]`, `disks[0].size`, `tags[*]`
    -> segments, as Pulumi's resource.PropertyPath parses them."""
    segments: list[str | int] = []
    pos = 0
    while pos < len(path):
        m = _SEGMENT.match(path, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"invalid property path {path!r} at {pos}")
        name, index, quoted = m.groups()
        if name is not None:
            segments.append(name)
        elif index is not None:
            segments.append("*" if index == "*" else int(index))
        else:
            segments.append(quoted.replace('\\"', '"'))
        pos = m.end()
    return segments


def _children(node: Any, segment: str | int) -> Iterator[tuple[Any, str | int]]:
    if segment == "*":
        keys = range(len(node)) if isinstance(node, list) else list(node) if isinstance(node, dict) else []
        for key in keys:
            yield node, key
    elif isinstance(node, dict) and isinstance(segment, str) and segment in node:
        yield node, segment
    elif isinstance(node, list) and isinstance(segment, int) and segment < len(node):
        yield node, segment


def get_path(values: Any, segments: list[str | int]) -> list[Any]:
    """Every value at the path (several where it has wildcards)."""
    nodes = [values]
    for segment in segments:
        nodes = [container[key] for node in nodes for container, key in _children(_unwrap(node), segment)]
    return nodes


def _unwrap(node: Any) -> Any:
    return node.get("value") if is_secret(node) else node


def apply_ignore_changes(news: dict[str, Any], olds: dict[str, Any] | None,
                         paths: list[str]) -> dict[str, Any]:
    """The engine's processIgnoreChanges: at each ignored path the new inputs take the old
    value, or lose the property where the old inputs had none (a resource being created keeps
    what the program declared)."""
    if olds is None or not paths:
        return news
    result = copy.deepcopy(news)
    for path in paths:
        segments = parse_path(path)
        old_values = get_path(olds, segments)
        if old_values and "*" not in segments:
            _set_path(result, segments, copy.deepcopy(old_values[0]))
        elif not old_values:
            _delete_path(result, segments)
    return result


def _set_path(values: dict[str, Any], segments: list[str | int], value: Any) -> None:
    node: Any = values
    for segment, following in zip(segments, segments[1:]):
        node = _unwrap(node)
        if isinstance(node, dict):
            node = node.setdefault(segment, [] if isinstance(following, int) else {})
        elif isinstance(node, list) and isinstance(segment, int) and segment < len(node):
            node = node[segment]
        else:
            return
    node = _unwrap(node)
    last = segments[-1]
    if isinstance(node, dict) and isinstance(last, str):
        node[last] = value
    elif isinstance(node, list) and isinstance(last, int) and last < len(node):
        node[last] = value


def _delete_path(values: dict[str, Any], segments: list[str | int]) -> None:
    for container, key in [(c, k) for node in get_path(values, segments[:-1])
                           for c, k in _children(_unwrap(node), segments[-1])]:
        if isinstance(container, dict):
            container.pop(key, None)


def path_matches(pattern: str, changed: str) -> bool:
    """replaceOnChanges: does the changed top-level-or-nested path fall under the pattern?"""
    want = [s for s in parse_path(pattern) if not isinstance(s, int)]
    have = changed.split(".")
    return all(w in ("*", h) for w, h in zip(want, have))


# --- comparing declared values with the recorded state -----------------------------------------

# A provider's DiffSuppressFunc: (path, declared, recorded) -> whether the difference is none.
Suppress = Callable[[str, Any, Any], bool]


def changed_paths(news: dict[str, Any], state: dict[str, Any], maps: frozenset[str] = frozenset(),
                  suppress: Suppress | None = None) -> list[str]:
    """Dotted paths (list indexes left out) where a declared input differs from the state.

    As in a Terraform plan, what the program does not declare is not compared (the provider
    computes it), so nested objects are compared on the keys the program gives; the properties
    named in `maps` (labels, metadata, ...) are whole values and compared exactly.
    """
    out: list[str] = []
    for key, value in news.items():
        if key.startswith("__"):
            continue
        _compare(plain(value), plain(state.get(key)), key, (maps, suppress), out)
    return list(dict.fromkeys(out))


def _compare(new: Any, old: Any, path: str, rules: tuple[frozenset[str], Suppress | None],
             out: list[str]) -> None:
    maps, suppress = rules
    if suppress is not None and suppress(path, new, old):
        return
    leaf = path.rsplit(".", 1)[-1]
    if isinstance(new, dict) and leaf not in maps and not new.get(SIG):
        if not isinstance(old, dict):
            if new or old not in (None, {}):
                out.append(path)
            return
        for key, value in new.items():
            _compare(value, old.get(key), f"{path}.{key}", rules, out)
        return
    if isinstance(new, list) and new and isinstance(new[0], dict) and leaf not in maps:
        if not isinstance(old, list) or len(old) != len(new):
            out.append(path)
            return
        for n, o in zip(new, old):
            _compare(n, o, path, rules, out)
        return
    if not _equal(new, old):
        out.append(path)


def _equal(new: Any, old: Any) -> bool:
    if new in (None, [], {}, "") and old in (None, [], {}, ""):
        return True
    if isinstance(new, (int, float)) and isinstance(old, str):
        return str(new) == old  # int64 fields come back from JSON APIs as strings
    return bool(new == old)


# --- assets and archives ----------------------------------------------------------------------

def with_asset_hashes(value: Any) -> Any:
    """Assets and archives with the content hash the engine adds to them (asset.EnsureHash), so
    a changed file is a changed input even where its path is the same."""
    if isinstance(value, dict):
        value = {k: with_asset_hashes(v) for k, v in value.items()}
        if value.get(SIG) in (ASSET_SIG, ARCHIVE_SIG) and "hash" not in value:
            value["hash"] = _content_hash(value)
        return value
    if isinstance(value, list):
        return [with_asset_hashes(v) for v in value]
    return value


def _content_hash(value: dict[str, Any]) -> str:
    import hashlib
    from pathlib import Path

    digest = hashlib.sha256()
    if "text" in value:
        digest.update(str(value["text"]).encode())
    elif "assets" in value:
        for name in sorted(value["assets"]):
            digest.update(name.encode() + b"\0" + _content_hash(value["assets"][name]).encode())
    elif "path" in value:
        path = Path(value["path"])
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            digest.update(str(file.relative_to(path) if path.is_dir() else "").encode() + file.read_bytes())
    else:
        digest.update(str(value.get("uri", "")).encode())
    return digest.hexdigest()
