"""Worker pools with roles (chief, worker, ps, evaluator), as AI Platform / Vertex AI run a job:
the spec that declares them, the nodes they become, and each node's TF_CONFIG, CLUSTER_SPEC
and command, inspected as plans."""

from __future__ import annotations

import json
import shlex

import pytest
from pydantic import ValidationError

from infra.spec import cost
from infra.errors import ConfigError
from infra.providers.inventory import Inventory, Node
from infra.spec.cluster import ClusterSpec
from infra.spec.stack_config import load_stack
from trainctl.launchers.cluster_env import cluster_spec, task_of, tf_config
from trainctl.launchers.spec import LaunchSpec
from trainctl.launchers.ssh.commands import node_command, plan, servers, torchrun_args

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDEuYCTEyVZpPfXSnA6n/xaBlH5vTfcOVaZcm3nX571U"
PS_POOLS = [{"role": "worker", "count": 2}, {"role": "evaluator"}, {"role": "chief"}, {"role": "ps"}]


def pooled(spec: ClusterSpec) -> Inventory:
    """The inventory a realizer writes for the spec: one node per replica, in pool order."""
    return Inventory(
        stack=spec.name, provider="local", bucket_uri="gs://bkt", ssh_private_key="/k", known_hosts="/kh",
        nodes=tuple(Node(name=f"node{i}", rank=i, internal_ip=f"10.0.0.{10 + i}", ssh_host=f"10.0.0.{10 + i}",
                         host_keys=(KEY,), workdir=f"/w/node{i}", task=task)
                    for i, (task, _) in enumerate(spec.node_tasks)))


def env_of(command: str, name: str) -> dict:
    word = next(w for w in shlex.split(command) if w.startswith(f"{name}="))
    return json.loads(word.split("=", 1)[1])


def test_pools_are_ordered_as_vertex_numbers_them_and_set_the_node_count() -> None:
    spec = ClusterSpec(name="ps", pools=PS_POOLS)
    assert [p.role for p in spec.pools] == ["chief", "worker", "ps", "evaluator"]
    assert spec.node_count == 5
    assert spec.node_tasks == [("chief", 0), ("worker", 0), ("worker", 1), ("ps", 0), ("evaluator", 0)]
    assert ClusterSpec(name="one", nodes=3).node_tasks == [("chief", 0), ("worker", 0), ("worker", 1)]


@pytest.mark.parametrize("pools, overrides, message", [
    ([{"role": "worker", "count": 2}], {}, "a chief pool is required"),
    ([{"role": "chief", "count": 2}], {}, "the chief pool has exactly one replica"),
    ([{"role": "chief"}, {"role": "evaluator", "count": 2}], {}, "the evaluator pool has exactly one replica"),
    ([{"role": "chief"}, {"role": "chief"}], {}, "one pool per role; chief appears more than once"),
    ([{"role": "chief"}, {"role": "worker"}], {"nodes": 3}, "nodes 3 does not match the pools' 2 replicas"),
    ([{"role": "chief", "gpu": {"type": "nvidia-tesla-t4"}}], {}, "local stack has no accelerators"),
    ([{"role": "master"}], {}, "Input should be 'chief', 'worker', 'ps' or 'evaluator'"),
])
def test_bad_pools_are_refused_naming_the_problem(pools, overrides, message) -> None:
    with pytest.raises(ValidationError, match=message):
        ClusterSpec(name="bad", pools=pools, **overrides)


def test_each_gcp_pool_is_checked_against_the_catalog_like_a_one_group_cluster() -> None:
    base = dict(name="g", provider="gcp", project="p", zone="us-central1-a",
                ssh={"source_ranges": ["203.0.113.0/24"]}, machine_type="n1-standard-8")
    with pytest.raises(ValidationError, match=r"pools\[ps\]: GPU nvidia-tesla-t4 cannot be attached to n2-standard-8"):
        ClusterSpec(**base, pools=[{"role": "chief"}, {"role": "ps", "machine_type": "n2-standard-8",
                                                       "gpu": {"type": "nvidia-tesla-t4"}}])
    with pytest.raises(ValidationError, match=r"pools\[worker\]: unknown machine_type 'n9-huge'"):
        ClusterSpec(**base, pools=[{"role": "chief"}, {"role": "worker", "machine_type": "n9-huge"}])
    with pytest.raises(ValidationError, match="pools run on VMs"):
        ClusterSpec(**{**base, "kind": "tpu", "tpu": {"type": "v5litepod-8"}, "machine_type": None,
                       "zone": "us-west4-a"}, pools=[{"role": "chief"}])


def test_a_bundled_gpu_machine_in_a_pool_gets_its_gpus_and_each_pool_is_priced() -> None:
    spec = load_stack("tf-ps-pools")
    groups = {role: view for role, _, view in spec.groups()}
    assert (groups["chief"].machine_type, str(groups["chief"].accelerator)) == ("n1-standard-8", "gpu:1xnvidia-tesla-t4")
    assert (groups["ps"].machine_type, groups["ps"].gpu) == ("n2-standard-8", None)
    lines = dict(cost.estimate(spec).lines)
    assert lines["ps: 2 x n2-standard-8"] > 0 and "evaluator: 1 x n1-standard-4" in lines
    bundled = ClusterSpec(name="b", provider="gcp", project="p", zone="us-central1-a",
                          ssh={"source_ranges": ["203.0.113.0/24"]}, machine_type="n2-standard-8",
                          pools=[{"role": "chief", "machine_type": "g2-standard-8"}, {"role": "ps"}])
    assert str(bundled.groups()[0][2].accelerator) == "gpu:1xnvidia-l4"
    assert bundled.groups()[1][2].gpu is None


def test_tf_config_and_cluster_spec_are_set_as_ai_platform_and_vertex_set_them() -> None:
    inv = pooled(ClusterSpec(name="ps", pools=PS_POOLS))
    cluster = {"chief": ["10.0.0.10:2222"], "worker": ["10.0.0.11:2222", "10.0.0.12:2222"],
               "ps": ["10.0.0.13:2222"]}
    expected_tasks = [("chief", 0), ("worker", 0), ("worker", 1), ("ps", 0), ("evaluator", 0)]
    spec = LaunchSpec(run_id="r", command=("python", "-m", "trainers.digits_ps"), framework="tensorflow")
    commands = plan(inv, spec)
    for node, (role, index) in zip(inv.nodes, expected_tasks):
        assert task_of(inv, node) == (role, index)
        # the evaluator is not part of the cluster, only its own task (AI Platform's TF_CONFIG)
        assert tf_config(inv, node) == {"cluster": cluster, "task": {"type": role, "index": index},
                                         "environment": "cloud"}
        assert env_of(commands[node.name], "TF_CONFIG") == tf_config(inv, node)
        pool = ["chief", "worker", "ps", "evaluator"].index(role)
        assert cluster_spec(inv, node) == {
            "cluster": {"workerpool0": cluster["chief"], "workerpool1": cluster["worker"],
                        "workerpool2": cluster["ps"], "workerpool3": ["10.0.0.14:2222"]},
            "environment": "cloud", "task": {"type": f"workerpool{pool}", "index": index}}
        assert env_of(commands[node.name], "CLUSTER_SPEC") == cluster_spec(inv, node)
    # the chief decides when the job is over; ps and workers serve until then
    assert [n.name for n in servers(inv)] == ["node3", "node1", "node2"]


def test_an_inventory_from_before_pools_keeps_chief_and_workers_by_rank() -> None:
    spec = ClusterSpec(name="one", nodes=3)
    inv = pooled(spec).model_copy(update={"nodes": tuple(n.model_copy(update={"task": None})
                                                         for n in pooled(spec).nodes)})
    assert [task_of(inv, n) for n in inv.nodes] == [("chief", 0), ("worker", 0), ("worker", 1)]
    assert servers(inv) == []  # no parameter servers: every node's own exit counts


def test_torch_runs_torchrun_over_chief_and_workers_and_the_evaluator_its_own_command() -> None:
    inv = pooled(ClusterSpec(name="ddp", pools=[{"role": "chief"}, {"role": "worker", "count": 2},
                                                {"role": "evaluator"}]))
    spec = LaunchSpec(run_id="r", command=("python", "-m", "trainers.digits_ddp"),
                      role_commands={"evaluator": ("python", "-m", "trainers.eval_loop", "--job-dir", "{job_dir}")})
    for node in inv.nodes[:3]:
        args = torchrun_args(inv, node, spec)
        assert "--nnodes=3" in args and "--rdzv-endpoint=10.0.0.10:29400" in args
        assert args[-2:] == ["--module", "trainers.digits_ddp"]
    evaluator = shlex.split(node_command(inv, inv.nodes[3], spec))
    assert evaluator[-5:] == ["/w/node3/venv/bin/python", "-m", "trainers.eval_loop", "--job-dir", "gs://bkt/r"]
    assert not any(w.endswith("torchrun") for w in evaluator)
    assert not any(w.startswith("TF_CONFIG=") for w in evaluator)  # torch: CLUSTER_SPEC only
    assert env_of(node_command(inv, inv.nodes[3], spec), "CLUSTER_SPEC")["task"] == {"type": "workerpool3", "index": 0}


def test_torch_on_a_cluster_with_parameter_servers_is_refused_before_anything_runs() -> None:
    inv = pooled(ClusterSpec(name="ps", pools=PS_POOLS))
    with pytest.raises(ConfigError, match="PyTorch has no parameter servers"):
        plan(inv, LaunchSpec(run_id="r", command=("python", "t.py")))


def test_parallel_trials_do_not_split_worker_pools_and_a_split_share_has_its_own_chief() -> None:
    from trainctl.launchers.ssh.launcher import OverSsh

    pooled_spec = ClusterSpec(name="ps", pools=PS_POOLS)
    with pytest.raises(ConfigError, match="parallel_mode: sequential"):
        OverSsh().check_slots(pooled_spec, 2)
    assert OverSsh().check_slots(pooled_spec, 1) == 5
    plain = ClusterSpec(name="two", nodes=2)
    shares = OverSsh().slots(plain, pooled(plain), 2)
    for _, share in shares:
        (node,) = share.nodes
        assert task_of(share, node) == ("chief", 0)  # not "worker 0" of a cluster with no chief


def test_pools_take_the_clusters_spot_flag_unless_they_set_their_own_and_the_saving_compares_on_demand() -> None:
    spec = load_stack("tf-ps-pools", overrides={"spot": True, "pools": [
        {"role": "chief", "spot": False}, {"role": "worker", "count": 2}, {"role": "ps", "machine_type": "n2-standard-8"}]})
    assert [p.spot for p in spec.pools] == [False, True, True] and spec.has_spot
    assert [spec.node_is_spot(i) for i in range(spec.node_count)] == [False, True, True, True]
    on_demand = spec.on_demand()
    assert not on_demand.has_spot
    assert cost.estimate(on_demand).per_hour > cost.estimate(spec).per_hour
    local = ClusterSpec(name="l", spot=True, pools=[{"role": "chief"}, {"role": "worker", "spot": False}])
    assert [local.node_is_spot(i) for i in range(2)] == [True, False]


def test_a_stack_with_one_on_demand_pool_among_spot_ones_declares_each_and_passes_the_policy_pack() -> None:
    from infra.providers.gcp.program.mocks import evaluate
    from policy.declared import Resource
    from policy.rules import check_resources

    spec = load_stack("tf-ps-pools", overrides={"spot": True, "pools": [
        {"role": "chief", "spot": False}, {"role": "worker", "count": 2}, {"role": "ps", "machine_type": "n2-standard-8"}]})
    declared = evaluate(spec, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMOCKKEY")
    scheduling = {r.inputs["name"]: (r.inputs["scheduling"]["provisioningModel"],
                                     r.inputs["scheduling"].get("instanceTerminationAction"))
                  for r in declared.of_type("compute/instance:Instance")}
    assert scheduling == {"tf-ps-pools-node-0": ("STANDARD", None), "tf-ps-pools-node-1": ("SPOT", "DELETE"),
                          "tf-ps-pools-node-2": ("SPOT", "DELETE"), "tf-ps-pools-node-3": ("SPOT", "DELETE")}
    assert check_resources([Resource(r.type, r.name, r.inputs, getattr(r, "options", None) or {})
                            for r in declared.resources]) == []
