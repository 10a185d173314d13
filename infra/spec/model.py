"""What every spec model shares: frozen, unknown fields refused, and defaults that depend on
other fields filled in during validation (resolve). ClusterSpec, its sections and the
provider constraints that complete it all build on these two."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict


class SpecModel(BaseModel):
    # Each field is described by the docstring under it, which docs/gen_reference.py reads from the
    # source for the docs site's reference. Not use_attribute_docstrings=True: pydantic would then
    # inspect every model's source on import, ~80 ms more on each CLI start that loads the models.
    model_config = ConfigDict(extra="forbid", frozen=True)


M = TypeVar("M", bound=BaseModel)


def resolve(model: M, derived: dict[str, Any]) -> M:
    """Fill in defaults derived from other fields, during validation only. A validator cannot
    return a new model when validation runs through __init__ (pydantic ignores it and warns),
    so the validated instance is completed in place, before anyone else has seen it."""
    for name, value in derived.items():
        object.__setattr__(model, name, value)
    return model
