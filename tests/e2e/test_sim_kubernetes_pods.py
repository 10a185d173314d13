"""A simulated cluster's pods are processes on this machine, run by trainctl's GKE launcher
through the cluster's API: each has its pod's hostname and a loopback address of its own, finds
the Job's other pods by the names the headless Service publishes, streams its output as its
log, and is gone, with its processes, when its Job is deleted."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import textwrap
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.fakes.sim_fixtures import make_sim  # noqa: F401
from tests.unit.providers.simulator.test_sim_kubernetes_api import gke_cluster  # noqa: F401 (fixture)

from gcpsim.kubernetes import images

pytestmark = pytest.mark.e2e  # pods run in mount and UTS namespaces of their own

PROBE = """
import os, socket, sys, time
index = int(os.environ["JOB_COMPLETION_INDEX"])
svc = os.environ["SVC"]
me, peer = f"{os.environ['JOB']}-{index}", f"{os.environ['JOB']}-{1 - index}"
mine = socket.gethostbyname(socket.gethostname())
print(f"hostname {socket.gethostname()} address {mine} peer {socket.gethostbyname(peer + '.' + svc)}", flush=True)
if index == 0:
    server = socket.create_server((mine, 29555))
    conn, (addr, _) = server.accept()
    print(f"pod 0 heard {conn.recv(100).decode()!r} from {addr}", flush=True)
else:
    for _ in range(100):
        try:
            conn = socket.create_connection((f"{peer}.{svc}", 29555), timeout=5)
            break
        except OSError:
            time.sleep(0.1)
    conn.sendall(b"hello from pod 1")
    print("pod 1 said hello", flush=True)
"""


def launch(gke_cluster, tmp_path: Path, image: str | None, command: tuple[str, ...], run_id: str = "probe",
           cancel: threading.Event | None = None, echo=None, framework: str = "tensorflow", data: tuple = (),
           queue: str | None = None):
    from infra.providers.inventory import Inventory
    from infra.spec.stack_config import load_stack
    from trainctl.launchers.gke.job import run_job
    from trainctl.launchers.spec import LaunchSpec

    _, _, _, config = gke_cluster
    lines: list[str] = []
    inventory = Inventory(stack="gke-l4", provider="gcp", nodes=(), bucket_uri="gs://bkt", ssh_private_key="",
                          known_hosts="", gke_service_account="runner@p.iam.gserviceaccount.com",
                          kubeconfig=str(config))
    spec = LaunchSpec(run_id=run_id, framework=framework, command=command, image=image,
                      env={"JOB": run_id, "SVC": f"{run_id}-svc"}, data=data, queue=queue)
    result = run_job(load_stack("gke-l4"), inventory, spec, tmp_path / "logs", echo or lines.append,
                     poll=0.05, cancel=cancel)
    return result, lines


def probe_image(gke_cluster, tmp_path: Path) -> str:
    code = tmp_path / "code"
    code.mkdir()
    (code / "probe.py").write_text(textwrap.dedent(PROBE))
    image = "simulated.registry.invalid/tests/probe:1"
    images.register(gke_cluster[0].simulator.home, image, env=None, workdir=code, describe="the probe's code")
    return image


def test_the_pods_of_an_indexed_job_reach_each_other_by_their_published_names(gke_cluster, tmp_path):
    result, lines = launch(gke_cluster, tmp_path, probe_image(gke_cluster, tmp_path), ("python3", "probe.py"))
    assert result.ok, lines
    said = {i: [line.split("]:", 1)[1] for line in lines if line.startswith(f"[pod{i} ")] for i in (0, 1)}
    (zero,) = [line.split() for line in said[0] if line.startswith("hostname ")]
    (one,) = [line.split() for line in said[1] if line.startswith("hostname ")]
    assert zero[1] == "probe-0" and one[1] == "probe-1"  # hostname, address, peer's address as resolved
    assert zero[3].startswith("127.") and zero[3] != one[3] and (zero[5], one[5]) == (one[3], zero[3])
    assert "pod 0 heard 'hello from pod 1' from 127." in "\n".join(said[0])
    assert any("is a process on this machine, not a container" in line for line in said[0])


def test_googles_pytorch_image_is_stood_in_for_by_an_environment_with_torch(gke_cluster, tmp_path):
    """No image: the catalog's PyTorch image for the pool (GPU), stood in for by an environment
    with torch built from the uv cache; torchrun's rendezvous across both pods."""
    result, lines = launch(gke_cluster, tmp_path, None, ("python", "-m", "torch.utils.collect_env"),
                           framework="torch")
    assert result.ok, lines[-20:]
    stand_in = [line for line in lines if "is stood in for by a torch environment" in line]
    assert len(stand_in) == 2 and "pytorch-cu124" in stand_in[0]
    assert sum("PyTorch version: 2." in line for line in lines) == 2  # one worker a pod


def test_an_image_nothing_stands_in_for_leaves_the_pod_waiting_in_err_image_pull(gke_cluster, tmp_path):
    stop = threading.Event()
    seen: list[str] = []

    def echo(line: str) -> None:
        seen.append(line)
        if "ErrImagePull" in line:
            stop.set()

    result, _ = launch(gke_cluster, tmp_path, "docker.io/library/busybox:1", ("true",), cancel=stop, echo=echo)
    assert result.cancelled
    assert any('ErrImagePull: Failed to pull image "docker.io/library/busybox:1": a simulated cluster pulls no '
               "images" in line for line in seen)


@dataclass
class MarkedPods:
    """Two pods whose process is named by a marker, each printing `started` then waiting on a
    child `sleep`; `started` holds the marked processes alive as each pod said it started."""
    marker: str = field(default_factory=lambda: f"sleeper-{uuid.uuid4().hex[:10]}")
    both_started: threading.Event = field(default_factory=threading.Event)
    started: list[list[str]] = field(default_factory=list)

    @property
    def command(self) -> tuple[str, ...]:
        return ("bash", "-c", f"exec -a {self.marker} sh -c 'echo started; sleep 300'")

    def pids(self) -> list[str]:
        return subprocess.run(["pgrep", "-f", self.marker], capture_output=True, text=True).stdout.split()

    def echo(self, line: str) -> None:
        if line.endswith("]:started"):
            self.started.append(self.pids())
            if len(self.started) == 2:
                self.both_started.set()


def test_a_cancelled_run_leaves_no_process_of_its_pods(gke_cluster, tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    image = "simulated.registry.invalid/tests/sleeper:1"
    images.register(gke_cluster[0].simulator.home, image, env=None, workdir=code, describe="nothing")
    pods = MarkedPods()
    result, _ = launch(gke_cluster, tmp_path, image, pods.command, cancel=pods.both_started, echo=pods.echo)
    assert result.cancelled and len(pods.started) == 2 and all(pods.started)
    assert pods.pids() == []


@pytest.fixture
def service_cluster(tmp_path, monkeypatch):
    """A cluster of a simulator that runs as its service (the daemon), reached over HTTP only:
    (the service's pid, its home, the shape of gke_cluster)."""
    import tempfile

    from google.cloud import compute_v1, container_v1

    from infra.providers.gcp.program.gke import kubeconfig
    from gcpsim import daemon
    from gcpsim.kubernetes import auth
    from tests.fakes.sim_fixtures import RunningSim
    from tests.unit.providers.simulator.test_sim_container import CLUSTER, PARENT, cluster, done

    home = Path(tempfile.mkdtemp(dir="/var/lib/trainctl-tests")) / "simulator"
    url = daemon.ensure_running(home, api_only=True)
    try:
        s = RunningSim(None, url, "sim-project")  # type: ignore[arg-type]  # HTTP only
        s.create_project(project=s.project, default_delay=0.0,
                         services=["compute.googleapis.com", "container.googleapis.com"])
        s.client(compute_v1.NetworksClient).insert(project=s.project, network_resource=compute_v1.Network(
            name="stack-vpc", auto_create_subnetworks=False)).result()
        s.client(compute_v1.SubnetworksClient).insert(
            project=s.project, region="us-central1", subnetwork_resource=compute_v1.Subnetwork(
                name="stack-subnet", network=f"projects/{s.project}/global/networks/stack-vpc",
                ip_cidr_range="10.128.0.0/20")).result()
        client = s.client(container_v1.ClusterManagerClient)
        done(client, client.create_cluster(parent=PARENT, cluster=cluster()))
        got = client.get_cluster(name=CLUSTER)
        auth.write_auth_plugin(tmp_path / "bin", home)
        monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
        config = tmp_path / "kubeconfig"
        config.write_text(kubeconfig(got.name, got.endpoint, got.master_auth.cluster_ca_certificate))
        yield json.loads((home / "daemon.json").read_text())["pid"], home, (s, client, got, config)
    finally:
        daemon.stop(home)
        shutil.rmtree(home.parent, ignore_errors=True)


def test_a_killed_simulator_service_takes_its_pods_processes_with_it(service_cluster, tmp_path):
    """The pods live in the service's process tree: a service killed outright, with no
    teardown at all, leaves no pod process behind."""
    pid, home, running = service_cluster
    (tmp_path / "code").mkdir()
    image = "simulated.registry.invalid/tests/sleeper:1"
    images.register(home, image, env=None, workdir=tmp_path / "code", describe="nothing")
    pods, cancel = MarkedPods(), threading.Event()
    launcher = threading.Thread(target=lambda: _quietly(launch, running, tmp_path, image, pods.command,
                                                        cancel=cancel, echo=pods.echo), daemon=True)
    launcher.start()
    assert pods.both_started.wait(60) and all(pods.started)
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 15
    while pods.pids() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert pods.pids() == []
    cancel.set()  # the launch, whose cluster is gone, ends (its teardown fails: nothing answers)
    launcher.join(60)


def _quietly(fn, *args, **kwargs) -> None:
    try:
        fn(*args, **kwargs)
    except Exception:
        pass


READ_DATA = """
import os
root = os.environ["TRAINCTL_DATA_DIR"] + "/digits"
print("files", sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs), flush=True)
print("a.txt says", open(root + "/a.txt").read(), flush=True)
try:
    open(root + "/new.txt", "w")
    print("the volume is writable", flush=True)
except OSError as exc:
    print("the volume is read-only:", exc.strerror, flush=True)
"""


def test_every_pod_reads_its_data_input_from_a_read_only_gcsfuse_volume(gke_cluster, tmp_path):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    from bootstrap.data_inputs import DataInput

    sim = gke_cluster[0]
    bucket = storage.Client(project=sim.project, credentials=AnonymousCredentials(),
                            client_options={"api_endpoint": sim.url}).create_bucket("user-datasets")
    for name, text in {"digits/a.txt": "shard a", "digits/sub/b.txt": "shard b", "labels/c.txt": "other"}.items():
        bucket.blob(name).upload_from_string(text)
    code = tmp_path / "code"
    code.mkdir()
    (code / "read_data.py").write_text(textwrap.dedent(READ_DATA))
    image = "simulated.registry.invalid/tests/read-data:1"
    images.register(sim.simulator.home, image, env=None, workdir=code, describe="the reader's code")
    existed = Path("/data").exists()
    result, lines = launch(gke_cluster, tmp_path, image, ("python3", "read_data.py"), run_id="withdata",
                           data=(DataInput(source="gs://user-datasets/digits/", path="digits"),))
    assert result.ok, "\n".join(lines[-30:])
    logs = "\n".join(lines)
    assert logs.count("files ['a.txt', 'sub/b.txt']") == 2, logs  # both pods; only-dir keeps labels/ out
    assert logs.count("a.txt says shard a") == 2
    assert logs.count("the volume is read-only: Read-only file system") == 2
    assert Path("/data").exists() == existed  # the mountPath made for the pods went with them
