"""What a node computes with, typed and checked against the catalog: Cpu, Gpu(type, count) or
Tpu(type). Inventories written by earlier versions and the Pulumi program's outputs carry the
label form ("cpu", "gpu:2xnvidia-tesla-t4", "tpu:v5litepod-16"); it parses into the same models,
and str() gives it back for display."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from infra.spec import catalog


class _Accelerator(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Cpu(_Accelerator):
    kind: Literal["cpu"] = "cpu"

    def __str__(self) -> str:
        return "cpu"


class Gpu(_Accelerator):
    kind: Literal["gpu"] = "gpu"
    type: Annotated[str, AfterValidator(catalog.known_gpu)]
    count: int = Field(ge=1)

    def __str__(self) -> str:
        return f"gpu:{self.count}x{self.type}"


class Tpu(_Accelerator):
    kind: Literal["tpu"] = "tpu"
    type: Annotated[str, AfterValidator(catalog.known_tpu)]

    @property
    def spec(self) -> catalog.TpuType:
        return catalog.TPUS[self.type]

    def __str__(self) -> str:
        return f"tpu:{self.type}"


def from_label(value: Any) -> Any:
    """"gpu:2xnvidia-tesla-t4" -> {"kind": "gpu", ...}; models and dicts pass through."""
    if not isinstance(value, str):
        return value
    kind, _, rest = value.partition(":")
    if kind == "gpu":
        count, _, gpu = rest.partition("x")
        return {"kind": "gpu", "type": gpu, "count": int(count) if count.isdigit() else count}
    if kind == "tpu":
        return {"kind": "tpu", "type": rest}
    return {"kind": kind}


Accelerator = Annotated[Union[Cpu, Gpu, Tpu], Field(discriminator="kind"), BeforeValidator(from_label)]
