"""The resource monitor the program's SDK talks to: the Python SDK's MockMonitor interface
(pulumi/runtime/mocks.py), answered by the engine instead of by mocks. Each RegisterResource
request carries what the real engine's monitor receives over gRPC (inputs with secrets, parent,
provider reference, dependencies, protect, retainOnDelete, deleteBeforeReplace, ignoreChanges,
replaceOnChanges, importId, additionalSecretOutputs, customTimeouts.create); the answer is the resource's id and
outputs once its step is done, which is what lets the program's outputs resolve."""

from __future__ import annotations

import re
from typing import Any

from pulumi.runtime.mocks import MockMonitor
from pulumi.runtime.proto import resource_pb2

from gcpsim.pulumi.engine import STACK_TYPE, Deployment, Goal
from gcpsim.pulumi.properties import from_struct, to_struct


def goal_of(urn: str, request: Any) -> Goal:
    return Goal(
        urn=urn, type=request.type, name=request.name, custom=bool(request.custom),
        parent=request.parent, inputs=from_struct(request.object), provider=request.provider,
        dependencies=list(request.dependencies),
        property_dependencies={k: list(v.urns) for k, v in request.propertyDependencies.items()},
        protect=bool(request.protect), retain_on_delete=bool(request.retainOnDelete),
        delete_before_replace=request.deleteBeforeReplace if request.deleteBeforeReplaceDefined else None,
        ignore_changes=list(request.ignoreChanges), replace_on_changes=list(request.replaceOnChanges),
        import_id=request.importId, additional_secret_outputs=list(request.additionalSecretOutputs),
        create_timeout=go_duration(request.customTimeouts.create),
        update_timeout=go_duration(request.customTimeouts.update))


def go_duration(text: str) -> float | None:
    """Seconds of a Go duration string ("60m", "1h30m", "90s"), as customTimeouts carry them."""
    parts = re.findall(r"(\d+(?:\.\d+)?)(h|m|s)", text or "")
    if not parts:
        return None
    return sum(float(n) * {"h": 3600, "m": 60, "s": 1}[unit] for n, unit in parts)


class EngineMonitor(MockMonitor):
    def __init__(self, deployment: Deployment) -> None:
        super().__init__(mocks=None)  # type: ignore[arg-type]
        self.deployment = deployment

    def RegisterResource(self, request: Any) -> Any:
        urn = self.make_urn(request.parent, request.type, request.name)
        state = self.deployment.register(goal_of(urn, request))
        if request.type == STACK_TYPE:
            return resource_pb2.RegisterResourceResponse(urn=urn)
        self.resources[urn] = MockMonitor.ResourceRegistration(urn, state["id"], state["outputs"])
        return resource_pb2.RegisterResourceResponse(urn=urn, id=state["id"], object=to_struct(state["outputs"]))

    def RegisterResourceOutputs(self, request: Any) -> Any:
        self.deployment.register_outputs(request.urn, from_struct(request.outputs))
        return super().RegisterResourceOutputs(request)

    def ReadResource(self, request: Any) -> Any:
        raise NotImplementedError(f"reading an existing resource ({request.type} {request.id!r}, "
                                  "a `.get()` in the program) is not supported by the simulator's pulumi")

    def Invoke(self, request: Any) -> Any:
        if request.tok == "pulumi:pulumi:getResource":
            return super().Invoke(request)
        raise NotImplementedError(f"provider function {request.tok} is not supported by the simulator's pulumi")
