"""GCP's label rules, wherever a resource carries GCP labels (a node pool's own Kubernetes labels
follow Kubernetes' rules instead)."""

from __future__ import annotations

from typing import Any, Iterator, Mapping

from policy.declared import T_NODEPOOL, Resource, mapping


def _label_chars_ok(text: str) -> bool:
    # GCP allows lowercase letters (international ones too), digits, '-' and '_'.
    return all(c.isdigit() or c in "-_" or (c.isalpha() and c == c.lower()) for c in text)


def label_problems(labels: Mapping[str, Any]) -> list[str]:
    problems: list[str] = []
    if len(labels) > 64:
        problems.append(f"{len(labels)} labels: at most 64 per resource")
    for key, value in labels.items():
        key_s = str(key)
        if not 1 <= len(key_s) <= 63 or not _label_chars_ok(key_s) or not key_s[0].isalpha():
            problems.append(f"label key {key_s!r}: 1-63 characters, lowercase letters, digits, '-' "
                            "and '_', starting with a lowercase letter")
        if not isinstance(value, str):
            continue  # unknown during a preview
        if len(value) > 63 or not _label_chars_ok(value):
            problems.append(f"label {key_s}={value!r}: values are at most 63 characters of "
                            "lowercase letters, digits, '-' and '_'")
    return problems


def labels_valid(r: Resource) -> Iterator[str]:
    if not r.type.startswith("gcp:"):
        return
    for key in ("labels", "resourceLabels"):
        labels = mapping(r.props.get(key))
        if r.type == T_NODEPOOL:
            continue  # a node pool's own `labels` are Kubernetes labels
        for problem in label_problems(labels):
            yield f"{r.props.get('name', r.name)!r} {key}: {problem}"
    node_labels = mapping(mapping(r.props.get("nodeConfig")).get("resourceLabels"))
    for problem in label_problems(node_labels):
        yield f"{r.props.get('name', r.name)!r} nodeConfig.resourceLabels: {problem}"
