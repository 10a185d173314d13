"""Nodes carry a typed accelerator, checked against the catalog; label strings (older
inventories, the Pulumi program's outputs) parse into the same models."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from infra.spec.accelerator import Cpu, Gpu, Tpu
from infra.providers.inventory import Inventory, Node
from infra.spec.stack_config import load_stack


def node(accelerator: object) -> Node:
    return Node.model_validate({"name": "n0", "rank": 0, "internal_ip": "10.0.0.2", "ssh_host": "10.0.0.2",
                                "host_keys": ["ssh-ed25519 AAAA"], "workdir": "/w", "accelerator": accelerator})


@pytest.mark.parametrize("label, typed", [
    ("cpu", Cpu()), ("gpu:2xnvidia-tesla-t4", Gpu(type="nvidia-tesla-t4", count=2)),
    ("tpu:v5litepod-16", Tpu(type="v5litepod-16")),
])
def test_labels_parse_into_typed_accelerators_and_print_back(label, typed):
    assert node(label).accelerator == typed
    assert str(typed) == label


@pytest.mark.parametrize("label, message", [
    ("gpu:2xnvidia-tesla-z9", "unknown GPU type 'nvidia-tesla-z9'"),
    ("tpu:v9-1", "unknown TPU type 'v9-1'"),
    ("fpga", "does not match any of the expected tags"),
])
def test_accelerators_the_catalog_does_not_know_are_refused(label, message):
    with pytest.raises(ValidationError, match=message):
        node(label)


def test_an_inventory_round_trips_with_typed_accelerators(tmp_path: Path):
    inv = Inventory(stack="s", provider="gcp", bucket_uri="gs://b", ssh_private_key="k", known_hosts="h",
                    nodes=(node("tpu:v5litepod-16"),))
    inv.write(tmp_path / "inventory.json")
    back = Inventory.read(tmp_path / "inventory.json")
    assert back == inv and isinstance(back.nodes[0].accelerator, Tpu)
    assert back.nodes[0].accelerator.spec.hosts == 4


@pytest.mark.parametrize("stack, expected", [("local", Cpu()), ("gpu-t4x2", Gpu(type="nvidia-tesla-t4", count=2)),
                                             ("tpu-v5e-16", Tpu(type="v5litepod-16"))])
def test_a_stacks_nodes_get_the_accelerator_its_spec_declares(stack, expected):
    assert load_stack(stack).accelerator == expected
