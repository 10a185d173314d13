"""A resource as the program registers it with the engine (RegisterResource's request): its URN,
type, inputs and the options the engine honours."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Goal:
    urn: str
    type: str
    name: str
    custom: bool
    parent: str = ""
    inputs: dict[str, Any] = field(default_factory=dict)
    provider: str = ""
    dependencies: list[str] = field(default_factory=list)
    property_dependencies: dict[str, list[str]] = field(default_factory=dict)
    protect: bool = False
    retain_on_delete: bool = False
    delete_before_replace: bool | None = None
    ignore_changes: list[str] = field(default_factory=list)
    replace_on_changes: list[str] = field(default_factory=list)
    import_id: str = ""
    additional_secret_outputs: list[str] = field(default_factory=list)
    declared: dict[str, Any] = field(default_factory=dict)  # inputs before the provider's check
    create_timeout: float | None = None  # customTimeouts.create, seconds: the provider's create timeout
    update_timeout: float | None = None  # customTimeouts.update, seconds: the provider's update timeout
