"""A GCP stack run end to end in a simulated project: the GCP realizer, the Pulumi program and
its provider's calls, real machines behind the simulated VMs, bootstrap over SSH with host keys
from guest attributes, the experiment's data staged by every node from the user's bucket in the
project (read access granted to the nodes' account by the program, removed by `down`), the
network pre-flight (gloo), torchrun across the machines, checkpoints in the simulated bucket, and
nothing left afterwards."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
import yaml

from infra.spec.ledger import Ledger
from tests.conftest import REPO, digits_shards, trainctl
from trainctl.cli.output import usd

pytestmark = pytest.mark.e2e


@pytest.fixture
def simulated_home(trainctl_home):
    yield trainctl_home
    from gcpsim import daemon, nodes

    sim_home = trainctl_home / "simulator"
    daemon.stop(sim_home)
    nodes.cleanup_all(sim_home)


def run_simulated(tmp_path, name: str, experiment: str) -> str:
    """`trainctl run --simulate` of an experiment file (YAML text); its log, once it succeeded."""
    path = tmp_path / f"{name}.yaml"
    path.write_text(experiment)
    done = trainctl("run", str(path), "--simulate", "--runs-dir", str(tmp_path / "runs"), timeout=900)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-4000:]
    return log


def _leftovers(home) -> list[str]:
    from gcpsim import daemon, nodes

    sim_home = home / "simulator"
    found = nodes.leftovers(sim_home)
    if daemon.url_of(sim_home):
        found.append("the simulator service")
    ps = subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True).stdout
    found += [line for line in ps.splitlines() if str(sim_home) in line]
    stacks = home / "stacks"
    found += [str(p) for p in stacks.iterdir()] if stacks.exists() else []
    return found


PROJECT = "my-project"  # stacks/Pulumi.gpu-l4-spot.yaml's gcp:project
DATA_BUCKET = "user-datasets"


def _project_storage(sim_home):
    """The simulated project's Cloud Storage, as a user's client reaches it (its endpoint)."""
    import urllib.request

    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    from gcpsim import daemon

    url = daemon.ensure_running(sim_home)
    create = urllib.request.Request(f"{url}/trainctl-sim/v1/projects", data=json.dumps({"project": PROJECT}).encode(),
                                    method="POST", headers={"Content-Type": "application/json"})
    urllib.request.urlopen(create, timeout=30).close()
    return storage.Client(project=PROJECT, credentials=AnonymousCredentials(), client_options={"api_endpoint": url})


@pytest.fixture
def code_in_home():
    """The trainers where users keep code: a folder of root's home only root may enter (the
    simulated VMs' user is not root; the controller's seed install must still read it)."""
    import shutil
    import tempfile
    from pathlib import Path

    code = Path(tempfile.mkdtemp(prefix="trainctl-myproj-", dir=Path.home()))
    shutil.copytree(REPO / "trainers", code / "trainers", ignore=shutil.ignore_patterns("__pycache__"))
    yield code
    shutil.rmtree(code)


def _experiment_with_data(tmp_path, sim_home, trainer_python, code):
    """examples/digits-ddp.yaml reading its dataset from the user's bucket, checked by the
    pre-flight, its code from `code`."""
    shards = tmp_path / "shards"
    shards.mkdir()
    digits_shards(trainer_python, shards)
    bucket = _project_storage(sim_home).create_bucket(DATA_BUCKET)
    for shard in sorted(shards.iterdir()):
        bucket.blob(f"digits/{shard.name}").upload_from_filename(str(shard))
    exp = yaml.safe_load((REPO / "examples" / "digits-ddp.yaml").read_text())
    exp.update(code=str(code), data=[{"source": f"gs://{DATA_BUCKET}/digits/", "path": "digits"}],
               network_check={"size_mb": 8})
    exp["run"]["command"] += " --data-dir digits"
    path = tmp_path / "digits-data.yaml"
    path.write_text(yaml.safe_dump(exp))
    return path


def test_a_spot_gpu_stack_trains_in_a_simulated_project_and_leaves_nothing(simulated_home, tmp_path, trainer_python,
                                                                          code_in_home):
    exp = _experiment_with_data(tmp_path, simulated_home / "simulator", trainer_python, code_in_home)
    done = trainctl("run", str(exp), "--stack", "gpu-l4-spot", "--simulate",
                    "--runs-dir", str(tmp_path / "runs"), timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    log = done.stdout + done.stderr
    # GCP's own steps happened: APIs enabled, the quota read, the reaper function built
    assert "quota: " in log and "PREEMPTIBLE_NVIDIA_L4_GPUS (us-central1)" in log
    assert "gcp:cloudfunctionsv2:Function" in log
    assert "the VMs' accelerators (gpu:1xnvidia-l4) are declared, not present" in log
    run_id = re.search(r"\[trainctl\] run (\S+):", log)[1]
    metrics = json.loads((tmp_path / "runs" / run_id / "metrics.json").read_text())
    assert metrics["test_accuracy"] >= 0.95
    # every node staged the 18 shards itself, the ranks trained on them, after the pre-flight
    assert len(re.findall(r"^\[trainctl\] data on \S+: 18 objects copied", done.stdout, re.M)) == 2, log[-3000:]
    assert f"{run_id}-sa-data-{DATA_BUCKET}" in log  # the program's read grant on the user's bucket
    phases = list(json.loads((tmp_path / "runs" / run_id / "timings.json").read_text()))
    assert phases[:5] == ["up", "bootstrap", "data staging", "network check", "train"], phases
    network = json.loads((tmp_path / "runs" / run_id / "network.json").read_text())
    assert network["world"] == 2 and network["gbps"] > 0 and network["transport"] == "TCP (gloo)"
    for node_log in (tmp_path / "runs" / run_id / "logs" / "launch").glob("*.log"):
        assert "data: 1797 samples from digits" in node_log.read_text()
    assert _leftovers(simulated_home) == []
    # `down` took the grant back and left the user's bucket and its objects as they were
    data = _project_storage(simulated_home / "simulator").bucket(DATA_BUCKET)
    members = {m for b in data.get_iam_policy().bindings for m in b["members"]}
    assert not [m for m in members if m.startswith("serviceAccount:")], members
    assert len(list(data.list_blobs(prefix="digits/"))) == 18
    # Two g2-standard-8 spot VMs at the catalog's list prices, and what on demand would have cost.
    ledger = Ledger.from_json((tmp_path / "runs" / run_id / "ledger.json").read_text())
    assert [(n.capacity, n.usd_per_hour < n.on_demand_usd_per_hour) for n in ledger.nodes] == [("spot", True)] * 2
    assert ledger.total_usd > 0 and ledger.spot_saving_usd is not None and ledger.spot_saving_usd > 0
    assert f"spot saved {usd(ledger.spot_saving_usd)} over the whole run against the same nodes on demand" in log
