"""`trainctl plan` as a CI job reads it: through a pipe, the plan on stdout (nothing on stderr),
every name and value whole, the same bytes on every run, and `--json` as one documented
document (docs/plan-json.md) a policy can check."""

from __future__ import annotations

import json

from conftest import trainctl
from trainctl.cli.plan_document import FORMAT_VERSION, Plan

# What a CI runner's environment looks like: no terminal and no width to go by.
CI = {"COLUMNS": "", "TERMINAL_WIDTH": ""}


def planned(*args: str):
    done = trainctl("plan", *args, env=CI)
    assert done.returncode == 0, done.stderr
    return done


def test_plan_goes_to_stdout_whole_and_in_the_same_order_every_time():
    first, second = planned("--stack", "gpu-a100x8x2"), planned("--stack", "gpu-a100x8x2")
    assert first.stderr == "" and second.stderr == ""
    assert first.stdout == second.stdout  # Pulumi registers resources in no fixed order
    shown = first.stdout
    for whole in ("gpu-a100x8x2-api-storage", "gpu-a100x8x2-api-artifactregistry",
                  "ipCidrRange=10.128.0.0/20", "machineType=a2-highgpu-8g, zone=us-central1-a",
                  "estimated $58.92/hour"):
        assert whole in shown, shown
    assert "…" not in shown
    instances = [line for line in shown.splitlines() if "compute/instance" in line]
    assert ["node-0" in instances[0], "node-1" in instances[1]] == [True, True]


def test_plan_json_is_one_stable_document_with_capacity_and_cost():
    first, second = planned("--stack", "tf-ps-pools", "--json"), planned("--stack", "tf-ps-pools", "--json")
    assert first.stderr == "" and first.stdout == second.stdout
    document = json.loads(first.stdout)
    Plan.model_validate(document)  # the documented shape, no unknown field
    assert document["format_version"] == FORMAT_VERSION
    assert document["stack"] == {"name": "tf-ps-pools", "provider": "gcp", "kind": "vm",
                                      "project": "my-project", "zone": "us-central1-a",
                                      "region": "us-central1", "ttl_hours": 4.0, "ephemeral": False}
    pools = {p["role"]: p for p in document["capacity"]["pools"]}
    assert (pools["worker"]["nodes"], pools["worker"]["gpu"]) == (2, {"type": "nvidia-tesla-t4", "count_per_node": 1})
    assert (pools["ps"]["machine_type"], pools["ps"]["vcpus_per_node"], pools["ps"]["gpu"]) == ("n2-standard-8", 8, None)
    totals = document["capacity"]["totals"]
    assert totals == {"nodes": 6, "vcpus": 8 + 2 * 8 + 2 * 8 + 4, "gpus": {"nvidia-tesla-t4": 3},
                           "spot_gpus": {}, "tpu_chips": {}, "spot_tpu_chips": {}, "boot_disk_gb": 6 * 200}
    instances = [r for r in document["resources"] if r["kind"] == "compute/instance"]
    assert [r["values"]["pool"] for r in instances] == ["chief", "worker", "worker", "ps", "ps", "evaluator"]
    cost = document["cost"]
    assert cost["per_hour"] == round(sum(line["per_hour"] for line in cost["lines"]), 2)
    assert cost["for_ttl"] == round(cost["per_hour"] * 4, 2)
    table = planned("--stack", "tf-ps-pools").stdout
    assert f"estimated ${cost['per_hour']:.2f}/hour" in table  # the same plan as the table


def test_plan_json_counts_spot_gpus_and_tpu_chips_apart():
    spot = json.loads(planned("--stack", "gpu-l4-spot", "--json").stdout)["capacity"]["totals"]
    assert (spot["gpus"], spot["spot_gpus"]) == ({}, {"nvidia-l4": 2})
    tpu = json.loads(planned("--stack", "tpu-v5e-16", "--json").stdout)
    assert tpu["capacity"]["totals"]["tpu_chips"] == {"v5litepod-16": 16}
    assert tpu["capacity"]["pools"][0]["tpu"] == {"type": "v5litepod-16", "chips_per_node": 4}


def test_a_refused_plan_leaves_stdout_empty():
    refused = trainctl("plan", "--stack", "local", "--nodes", "0", "--json", env=CI)
    assert refused.returncode == 2 and refused.stdout == ""
    assert "--nodes, on stack file" in refused.stderr and "nodes: Input should be greater than or equal to 1" in refused.stderr


def test_plan_without_credentials_shows_each_pools_capacity_and_says_free_quota_was_not_read(tmp_path):
    offline = {**CI, "CLOUDSDK_CONFIG": str(tmp_path), "GOOGLE_APPLICATION_CREDENTIALS": ""}
    done = trainctl("plan", "--stack", "gpu-l4-spot", "--json", env=offline)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    document = json.loads(done.stdout)
    (pool,) = document["capacity"]["quota"]
    assert (pool["pool"], pool["provisioning"]) == ("gpu-l4-spot", "spot")
    lines = {line["metric"]: (line["needed"], line["free"]) for line in pool["lines"]}
    assert lines["PREEMPTIBLE_NVIDIA_L4_GPUS"] == (2, None) and lines["PREEMPTIBLE_CPUS"] == (16, None)
    assert pool["not_read"].startswith("not read: no Google credentials")
    assert all(r["kind"] != "capacity" for r in document["resources"])  # capacity is no resource
    table = trainctl("plan", "--stack", "gpu-l4-spot", env=offline).stdout
    assert "capacity per pool" in table and "free quota not read: no Google credentials" in table
    row = next(line for line in table.splitlines() if "PREEMPTIBLE_NVIDIA_L4_GPUS" in line)
    assert "us-central1" in row and "not read" in row
