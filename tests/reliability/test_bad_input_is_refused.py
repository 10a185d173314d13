"""Hostile and bad input through the real CLI entry point: every case exits 2 with a message
that names the problem, and nothing exists afterwards that did not exist before (no state, no
namespace, no interface, no run folder)."""

from __future__ import annotations

import os
import sys

import pytest
import yaml

from namespace_nodes import netns
from infra.providers.local.layout import Names
from trainctl.jobs import experiment as experiment_runs

GCP = {"gcp:project": "my-project", "gcp:zone": "us-central1-a", "trainctl:provider": "gcp",
       "trainctl:machine_type": "n1-standard-8", "trainctl:ssh": {"source_ranges": ["203.0.113.0/24"]}}
T4 = {"trainctl:gpu": {"type": "nvidia-tesla-t4", "count": 2}}
TPU = {**GCP, "gcp:zone": "us-west4-a", "trainctl:kind": "tpu", "trainctl:machine_type": None}


def stack(**config) -> str:
    """A stack file's text; keys are Pulumi config keys, None drops a key."""
    merged = {k.replace("__", ":"): v for k, v in config.items()}
    return yaml.safe_dump({"config": {k: v for k, v in merged.items() if v is not None}})


def gcp(**config) -> str:
    return stack(**{**{k.replace(":", "__"): v for k, v in {**GCP, **T4}.items()}, **config})


def tpu(**config) -> str:
    return stack(**{**{k.replace(":", "__"): v for k, v in TPU.items()}, **config})


def experiment(**fields) -> str:
    base = {"name": "e", "stack": "local", "code": ".", "run": {"command": "python train.py"}}
    return yaml.safe_dump({**base, **fields})


def local(**config) -> str:
    return stack(trainctl__provider="local", **config)


# AI Platform's CUSTOM tier with a T4 on the master, as its docs show a config.yaml
GPU_JOB_SPEC = yaml.safe_dump({"trainingInput": {
    "scaleTier": "CUSTOM", "masterType": "n1-standard-8", "pythonModule": "trainer.task",
    "masterConfig": {"acceleratorConfig": {"count": 1, "type": "NVIDIA_TESLA_T4"}}}})

S = "Pulumi.s.yaml"  # the stack file each stack case writes; passed as --stack
E = "exp.yaml"
PLAN = ["plan", "--stack", S]
RUN = ["run", E]

CASES = {
    # --- stack files: accelerators, machine types, zones (checked against the catalog) ---
    "unknown GPU type": (PLAN, {S: gcp(trainctl__gpu={"type": "nvidia-h9000"})},
                         "unknown GPU type 'nvidia-h9000'; valid:"),
    "GPU count the machine cannot take": (PLAN, {S: gcp(trainctl__gpu={"type": "nvidia-tesla-t4", "count": 3})},
                                          "gpu.count 3 is not attachable for nvidia-tesla-t4"),
    "bundled machine with another GPU count": (
        PLAN, {S: gcp(trainctl__machine_type="a2-highgpu-2g", trainctl__gpu={"type": "nvidia-tesla-a100", "count": 4})},
        "a2-highgpu-2g"),
    "GPU only sold bundled, on an N1": (PLAN, {S: gcp(trainctl__gpu={"type": "nvidia-l4", "count": 1})},
                                        "cannot be attached to n1-standard-8"),
    "GPU not offered in the zone": (PLAN, {S: gcp(gcp__zone="europe-north1-a")},
                                    "is not offered in zone 'europe-north1-a'"),
    "unknown machine type": (PLAN, {S: gcp(trainctl__machine_type="n9-mega-1")},
                             "unknown machine_type 'n9-mega-1'"),
    "too many vCPUs for the GPU count": (
        PLAN, {S: gcp(trainctl__machine_type="n1-standard-96", trainctl__gpu={"type": "nvidia-tesla-t4", "count": 1})},
        "vCPUs, more than"),
    "unknown TPU type": (PLAN, {S: tpu(trainctl__tpu={"type": "v9-8", "runtime_version": "x"})},
                         "unknown TPU type 'v9-8'"),
    "TPU type not offered in the zone": (
        PLAN, {S: tpu(gcp__zone="europe-west4-a", trainctl__tpu={"type": "v5litepod-8", "runtime_version": "v2-alpha-tpuv5-lite"})},
        "TPU type v5litepod-8 is not offered in zone 'europe-west4-a'"),
    "TPU runtime of another generation": (
        PLAN, {S: tpu(trainctl__tpu={"type": "v5litepod-8", "runtime_version": "tpu-vm-tf-2.16.1-pjrt"})},
        "runtime"),
    "TPU node count that is not its host count": (
        PLAN, {S: tpu(trainctl__nodes=2, trainctl__tpu={"type": "v5litepod-16", "runtime_version": "v2-alpha-tpuv5-lite"})},
        "has 4 host(s)"),
    "GPU and TPU together": (
        PLAN, {S: tpu(trainctl__gpu={"type": "nvidia-tesla-t4"}, trainctl__tpu={"type": "v5litepod-8", "runtime_version": "v2-alpha-tpuv5-lite"})},
        "either gpu or tpu"),
    "accelerator on the local stack": (PLAN, {S: local(trainctl__gpu={"type": "nvidia-tesla-t4"})},
                                       "the local stack has no accelerators"),
    # --- node counts ---
    "zero nodes": (PLAN, {S: local(trainctl__nodes=0)}, "nodes: Input should be greater than or equal to 1"),
    "negative nodes": (PLAN, {S: local(trainctl__nodes=-3)}, "nodes: Input should be greater than or equal to 1"),
    "a million nodes": (PLAN, {S: gcp(trainctl__nodes=10**6)}, "nodes: Input should be less than or equal to 512"),
    "more nodes than the local stack holds": (PLAN, {S: local(trainctl__nodes=17)},
                                              "nodes 17 is more than the local stack supports (1-16)"),
    "experiment asking the local stack for 99 nodes": (RUN, {E: experiment(overrides={"nodes": 99})},
                                                       "nodes 99 is more than the local stack supports (1-16)"),
    "node count that is not a number": (PLAN, {S: local(trainctl__nodes="two")}, "nodes: Input should be a valid integer"),
    "--nodes 0 on the command line": (["plan", "--stack", "local", "--nodes", "0"], {},
                                      "nodes: Input should be greater than or equal to 1"),
    # --- network ---
    "SSH open to the world": (PLAN, {S: gcp(trainctl__ssh={"source_ranges": ["0.0.0.0/0"]})}, "whole internet"),
    "SSH open to the IPv6 world": (PLAN, {S: gcp(trainctl__ssh={"source_ranges": ["::/0"]})}, "whole internet"),
    "CIDR with host bits": (PLAN, {S: gcp(trainctl__ssh={"source_ranges": ["10.0.0.1/8"]})}, "is not a valid CIDR"),
    "CIDR that is not one": (PLAN, {S: gcp(trainctl__ssh={"source_ranges": ["10.0.0.0/33"]})}, "is not a valid CIDR"),
    "no SSH source ranges on GCP": (PLAN, {S: gcp(trainctl__ssh=None)}, "ssh.source_ranges is required"),
    "public subnet range": (PLAN, {S: gcp(trainctl__network={"subnet_cidr": "8.8.8.0/24"})}, "must be a private IPv4 range"),
    "shell in the SSH user": (PLAN, {S: gcp(trainctl__ssh={"source_ranges": ["203.0.113.0/24"], "user": "x;reboot"})},
                              "is not a valid POSIX user name"),
    # --- names GCP or Kubernetes would reject ---
    "uppercase stack name": (["plan", "--stack", "Pulumi.BigName.yaml"], {"Pulumi.BigName.yaml": local()}, "BigName"),
    "stack name too long": (["plan", "--stack", f"Pulumi.{'x' * 70}.yaml"], {f"Pulumi.{'x' * 70}.yaml": local()},
                            "x" * 70),
    "label GCE would reject": (PLAN, {S: gcp(trainctl__labels={"Team": "ml"})}, "label key 'Team'"),
    "experiment name with a shell in it": (RUN, {E: experiment(name="x;rm -rf ~")}, "experiment name"),
    "experiment name too long for a stack": (RUN, {E: experiment(name="e" * 31)}, "longer than 30 characters"),
    # --- YAML shape ---
    "unknown stack key": (PLAN, {S: local(trainctl__node=3)}, "unknown key 'trainctl:node' (did you mean 'nodes'?)"),
    "unknown experiment key": (RUN, {E: experiment(artifact=["a"])}, "artifact: unknown key (did you mean 'artifacts'?)"),
    "unknown nested experiment key": (RUN, {E: experiment(restart={"max_restart": 1})},
                                      "restart.max_restart: unknown key (did you mean 'max_restarts'?)"),
    "node count that is a word, in an experiment's overrides": (
        RUN, {E: experiment(overrides={"nodes": "two"})}, f"{E}: overrides, on stack file"),
    "GPU pools of a job spec on the local stack": (
        ["run", "job.yaml"], {"job.yaml": GPU_JOB_SPEC}, "job.yaml (a job spec; --stack picks the stack it runs on)"),
    "unknown override": (RUN, {E: experiment(overrides={"node": 3})}, "override 'node' is not a cluster field (did you mean 'nodes'?)"),
    "stack file that is a list": (PLAN, {S: "- a\n- b\n"}, "expected a mapping at the top level, got list"),
    "experiment that is a string": (RUN, {E: "just words\n"}, "expected a mapping at the top level, got str"),
    "config that is not a mapping": (PLAN, {S: "config: [1, 2]\n"}, "'config' must be a mapping"),
    "node count that is a mapping": (PLAN, {S: local(trainctl__nodes={"a": 1})}, "nodes: Input should be a valid integer"),
    "key that only trainctl may set": (RUN, {E: experiment(base_dir="/")}, "unknown key 'base_dir'"),
    "YAML that does not parse": (PLAN, {S: "config: {a: [\n"}, "not valid YAML"),
    "huge stack file": (PLAN, {S: "config:\n" + "  # padding\n" * 100_000}, "larger than 1048576 bytes"),
    "huge experiment file": (RUN, {E: "name: e\n" + "# padding\n" * 120_000}, "larger than 1048576 bytes"),
    "missing stack": (["plan", "--stack", "nope"], {}, "no stack 'nope'"),
    # --- paths ---
    "artifact path escaping the job dir": (RUN, {E: experiment(artifacts=["../../etc/passwd"])}, "no '..'"),
    "absolute artifact path": (RUN, {E: experiment(artifacts=["/etc/shadow"])}, "no leading '/'"),
    "requirements outside the code": (RUN, {E: experiment(requirements="../../../etc/passwd")}, "no '..'"),
    "code folder that does not exist": (RUN, {E: experiment(code="missing")}, "is not a directory"),
    "bootstrap of a code folder that does not exist": (["bootstrap", "--code", "nosuchdir"], {},
                                                       "--code nosuchdir does not exist"),
    "bootstrap of a file as the code folder": (["bootstrap", "--code", E], {E: experiment()}, f"--code {E} is a file"),
    "two artifacts collected to one place": (RUN, {E: experiment(artifacts=["model/", "workdir:model/"])},
                                             "would both be collected to runs/<run-id>/model"),
    "artifacts from the working directory of GKE pods": (
        RUN, {E: experiment(stack="gke-l4", artifacts=["workdir:snapshot.pt"])}, "runs the job as GKE pods"),
    "a shared folder for GKE pods": (RUN, {E: experiment(stack="gke-l4", shared_dir={"links": ["snapshot.pt"]})},
                                     "shared_dir: stack gke-l4 runs the job as GKE pods"),
    "a shared_dir link escaping the working directory": (
        RUN, {E: experiment(shared_dir={"links": ["../snapshot.pt"]})}, "must be a relative path inside the program's"),
    "{shared_dir} in a command without shared_dir": (
        RUN, {E: experiment(run={"command": "python t.py --ckpt {shared_dir}/c"})}, "the experiment has no shared_dir"),
    "stack argument escaping the state folder": (["down", "--stack", "../../etc"], {}, "--stack '../../etc' must be 1-41 characters"),
    "run id escaping the runs folder": (["logs", "../../etc"], {}, "run id '../../etc'"),
    "run id with a shell in it": (["launch", "--run-id", "x;reboot", "--plan", "--", "python", "t.py"], {},
                                  "run id 'x;reboot' must be 1-63 lowercase letters"),
    # --- values that would reach a command line ---
    "environment name that is shell": (RUN, {E: experiment(run={"command": "x", "env": {"A;reboot": "1"}})},
                                       "environment variable name 'A;reboot' is not valid"),
    "empty command": (RUN, {E: experiment(run={"command": ""})}, "run.command"),
    "unknown framework": (["launch", "--framework", "mxnet", "--plan", "--", "python", "t.py"], {}, "framework"),
    "launch without a command": (["launch", "--stack", "local"], {}, "nothing to launch"),
    "exec without a command": (["exec", "--stack", "local"], {}, "nothing to run"),
    "node count that is a word, on the command line": (["up", "--nodes", "many"], {}, "Invalid value for '--nodes': Input should be a valid integer"),
    "option that does not exist": (["down", "--purge"], {}, "No such option: --purge"),
    "zero processes per node": (RUN, {E: experiment(run={"command": "x", "processes_per_node": 0})},
                                "processes_per_node"),
    "bootstrap step that does not exist": (["bootstrap", "--force", "everything"], {}, "force"),
    # --- sweeps and lifetimes ---
    "sweep bounds the wrong way round": (
        RUN, {E: experiment(sweep={"parameters": [{"name": "lr", "type": "DOUBLE", "min": 1, "max": 0}]})},
        "needs min < max"),
    "log scale from zero": (
        RUN, {E: experiment(sweep={"parameters": [{"name": "lr", "type": "DOUBLE", "min": 0, "max": 1, "scale": "LOG"}]})},
        "LOG scale needs min > 0"),
    "TTL of zero": (RUN, {E: experiment(ttl_hours=0)}, "ttl_hours"),
    "TTL of a year": (PLAN, {S: local(trainctl__ttl_hours=8760)}, "ttl_hours"),
    "resume of a sweep that never ran": (["run", E, "--resume", "ghost"], {E: experiment()}, "--resume ghost"),
}


@pytest.fixture
def machine_snapshot(trainctl_home, tmp_path, monkeypatch):
    """Everything a trainctl command could create, listed before and compared after: the
    namespaces and interfaces of its stacks (the stack file's `s` and every run it names; other
    tests build stacks of their own meanwhile), its home and its folder."""
    run_ids: list[str] = []
    name_run = experiment_runs.new_run_id

    def recorded(name: str) -> str:
        run_ids.append(name_run(name))
        return run_ids[-1]

    monkeypatch.setattr(experiment_runs, "new_run_id", recorded)

    def snapshot():
        stacks = [Names(s) for s in ("s", *run_ids)]
        links = os.listdir("/sys/class/net")
        return ({ns for ns in netns.list_netns() for n in stacks if ns.startswith(n.netns_prefix)},
                {link for link in links for n in stacks if link == n.bridge or link.startswith(f"tcv{n.digest[:6]}")},
                sorted(str(p) for p in trainctl_home.rglob("*")),
                sorted(p.name for p in tmp_path.iterdir()))

    return snapshot


def test_there_are_at_least_forty_cases():
    assert len(CASES) >= 40


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_exits_2_naming_the_problem_and_creates_nothing(case, tmp_path, monkeypatch, capsys,
                                                                  machine_snapshot):
    argv, files, needle = CASES[case]
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    before = machine_snapshot()
    from trainctl.cli import entry as cli

    monkeypatch.setattr(sys, "argv", ["trainctl", *argv])
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    out, err = capsys.readouterr()
    assert exit_info.value.code == 2, out + err
    assert needle in " ".join((out + err).split()), out + err
    assert machine_snapshot() == before
