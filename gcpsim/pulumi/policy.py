"""Policy packs, run as the engine runs them (`pulumi up --policy-pack DIR`): the pack is started
as an analyzer plugin (a Python pack: `python __main__.py` in the pack's virtualenv from
PulumiPolicy.yaml, which serves pulumi_policy's Analyzer over gRPC and prints its port), every
resource's inputs go to Analyze before its step, and the final outputs of the stack go to
AnalyzeStack after the last step (pkg/resource/deploy/step_generator.go analyzeAll and
AnalyzeResources). A mandatory violation makes its resource invalid, which fails the update
before that resource is touched; one from AnalyzeStack fails the update at its end.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from gcpsim.pulumi.display import Display
from gcpsim.pulumi.properties import to_struct

LEVELS = {0: "advisory", 1: "mandatory", 2: "disabled", 3: "remediate"}  # analyzer.proto EnforcementLevel


class PolicyError(Exception):
    """A pack that cannot be loaded or served."""


class PolicyPack:
    def __init__(self, directory: Path) -> None:
        spec = directory / "PulumiPolicy.yaml"
        if not spec.is_file():
            raise PolicyError(f"could not find PulumiPolicy.yaml in {directory}")
        doc = yaml.safe_load(spec.read_text()) or {}
        runtime = doc.get("runtime") or {}
        options = runtime.get("options") or {} if isinstance(runtime, dict) else {}
        venv = options.get("virtualenv")
        python = (directory / venv / "bin" / "python") if venv else Path("python3")
        self.version = str(doc.get("version") or "0.0.1")
        self.process = subprocess.Popen([str(python), "-u", "__main__.py"], cwd=directory,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        port = self.process.stdout.readline().strip()
        if not port.isdigit():
            self.process.kill()
            _, err = self.process.communicate()
            raise PolicyError(f"policy pack {directory} failed to start: {err.strip()}")
        import grpc
        from pulumi.runtime.proto import analyzer_pb2_grpc
        from google.protobuf import empty_pb2

        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.stub = analyzer_pb2_grpc.AnalyzerStub(self.channel)
        info = self.stub.GetAnalyzerInfo(empty_pb2.Empty())
        self.name = info.name

    def close(self) -> None:
        self.channel.close()
        self.process.kill()
        self.process.wait()

    def analyze(self, state: dict[str, Any], provider: dict[str, Any] | None) -> list[Any]:
        from pulumi.runtime.proto import analyzer_pb2

        return list(self.stub.Analyze(analyzer_pb2.AnalyzeRequest(**_resource(state, provider))).diagnostics)

    def analyze_stack(self, states: list[dict[str, Any]], providers: dict[str, dict[str, Any]]) -> list[Any]:
        from pulumi.runtime.proto import analyzer_pb2

        resources = [analyzer_pb2.AnalyzerResource(
            **_resource(s, providers.get((s.get("provider") or "").rsplit("::", 1)[0]), outputs=True),
            parent=s.get("parent") or "", dependencies=s.get("dependencies") or [])
            for s in states if s.get("custom") and not s["type"].startswith("pulumi:providers:")]
        return list(self.stub.AnalyzeStack(analyzer_pb2.AnalyzeStackRequest(resources=resources)).diagnostics)


def _resource(state: dict[str, Any], provider: dict[str, Any] | None, outputs: bool = False) -> dict[str, Any]:
    from pulumi.runtime.proto import analyzer_pb2

    props = state["outputs"] if outputs else state["inputs"]
    out: dict[str, Any] = dict(
        type=state["type"], urn=state["urn"], name=state["urn"].rsplit("::", 1)[-1],
        properties=to_struct({k: v for k, v in props.items() if not k.startswith("__")}),
        options=analyzer_pb2.AnalyzerResourceOptions(protect=bool(state.get("protect")),
                                                     parent=state.get("parent") or ""))
    if provider is not None:
        out["provider"] = analyzer_pb2.AnalyzerProviderResource(
            type=provider["type"], urn=provider["urn"], name=provider["urn"].rsplit("::", 1)[-1],
            properties=to_struct(provider["inputs"]))
    return out


class Analyzers:
    """The packs of one update; reports mandatory violations as the CLI lists them."""

    def __init__(self, directories: list[Path], display: Display) -> None:
        self.display = display
        self.packs: list[PolicyPack] = []
        try:
            for directory in directories:
                self.packs.append(PolicyPack(directory))
        except PolicyError:
            self.close()
            raise

    def close(self) -> None:
        for pack in self.packs:
            pack.close()

    def __call__(self, goal_or_states: Any, news: dict[str, Any] | None = None,
                 provider: dict[str, Any] | None = None) -> list[str]:
        """Mandatory violations of one resource (goal, inputs) or of the stack (final states)."""
        if isinstance(goal_or_states, list):
            providers = {s["urn"]: s for s in goal_or_states if s["type"].startswith("pulumi:providers:")}
            found = [(p, d) for p in self.packs for d in p.analyze_stack(goal_or_states, providers)]
        else:
            goal = goal_or_states
            state = {"type": goal.type, "urn": goal.urn, "inputs": news or {}, "protect": goal.protect,
                     "parent": goal.parent}
            found = [(p, d) for p in self.packs for d in p.analyze(state, provider)]
        mandatory = []
        for pack, d in found:
            level = d.enforcementLevel
            name = LEVELS.get(level, "disabled")
            where = d.urn.split("::")[-2:] if d.urn else []
            subject = " ".join(where[::-1]) if where else "stack"
            self.display.violation(f"    [{name}]  {pack.name} v{pack.version}  {d.policyName} ({subject})\n"
                                   f"    {d.description}\n    {d.message}")
            if name in ("mandatory", "remediate"):
                mandatory.append(d.message)
        return mandatory
