"""The program's provider endpoints: with TRAINCTL_GCP_API_ENDPOINT set, one explicit gcp
provider whose custom endpoints all derive from it, and every resource of every GCP stack uses
that provider; unset, the default provider (Google's endpoints)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi
import pytest

from infra.providers.gcp.program.endpoints import API_PATHS
from infra.providers.gcp.program.mocks import RecordingMocks
from infra.providers.gcp.reaper import API_ENDPOINT_ENV
from infra.spec.stack_config import available_stacks, load_stack

GCP_STACKS = [s for s in available_stacks() if load_stack(s).provider == "gcp"]
PUBKEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMOCKKEY"


@dataclass
class ProviderRecordingMocks(RecordingMocks):
    """infra.providers.gcp.program.mocks' outputs, and which provider each registration names."""

    registered: list[tuple[str, str, dict[str, Any], str]] = field(default_factory=list)

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        self.registered.append((args.typ, args.name, dict(args.inputs), args.provider or ""))
        return super().new_resource(args)


def declared(stack: str) -> ProviderRecordingMocks:
    from infra.providers.gcp.program.cluster import build

    mocks = ProviderRecordingMocks()
    pulumi.runtime.set_mocks(mocks, project="trainctl", stack=stack, preview=False)

    @pulumi.runtime.test
    def run():
        outputs = build(load_stack(stack), PUBKEY, 1_900_000_000)
        return pulumi.Output.all(*outputs.values())

    run()
    return mocks


@pytest.mark.parametrize("stack", GCP_STACKS)
def test_with_an_api_endpoint_every_resource_uses_one_provider_of_custom_endpoints(stack, monkeypatch):
    monkeypatch.setenv(API_ENDPOINT_ENV, "http://127.0.0.1:8123")
    mocks = declared(stack)
    providers = [r for r in mocks.registered if r[0] == "pulumi:providers:gcp"]
    assert len(providers) == 1
    _, name, inputs, _ = providers[0]
    assert inputs["computeCustomEndpoint"] == "http://127.0.0.1:8123/compute/v1/"
    assert inputs["tpuV2CustomEndpoint"] == "http://127.0.0.1:8123/v2/"
    assert len([k for k in inputs if k.endswith("CustomEndpoint")]) == len(API_PATHS)
    resources = [r for r in mocks.registered if r[0].startswith("gcp:")]
    assert resources and all(f"pulumi:providers:gcp::{name}::" in r[3] for r in resources), \
        [r[:2] for r in resources if not r[3]]


def test_without_an_api_endpoint_the_program_declares_no_provider(monkeypatch):
    monkeypatch.delenv(API_ENDPOINT_ENV, raising=False)
    mocks = declared("gpu-t4x2")
    assert not [r for r in mocks.registered if r[0].startswith("pulumi:providers:")]
    assert all(r[3] == "" for r in mocks.registered)
