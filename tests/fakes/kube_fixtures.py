"""The simulator's Kubernetes API with scripted pods, for the GKE launcher's tests.

    def test_x(k8s, tmp_path):
        k8s.pods.script = lambda attempt, index, try_: PodRun(lines=("epoch 1",), exit_code=0)
        result, echoed = launch_job(k8s, tmp_path)

Import with `from kube_fixtures import k8s, launch_job  # noqa: F401 (fixture)`.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from gcpsim.kubernetes.api import KubernetesApi
from gcpsim.kubernetes.scripted import PodRun, ScriptedPods

__all__ = ["GSA", "POLL", "TOKEN", "KubernetesApi", "PodRun", "k8s", "launch_job"]

TOKEN = "test-token"
GSA = "runner@p.iam.gserviceaccount.com"
POLL = 0.02  # the launcher's polling interval in tests (waits for deletions, watch fallback)


class ScriptedApi(KubernetesApi):
    pods: ScriptedPods


@pytest.fixture
def k8s() -> Iterator[ScriptedApi]:
    api = ScriptedApi(ScriptedPods(), TOKEN)
    yield api
    api.close()


def launch_job(api: KubernetesApi, tmp_path: Path, *, run_id: str = "r1", framework: str = "tensorflow",
               echo: Callable[[str], None] | None = None, cancel: threading.Event | None = None,
               stack: str = "gke-l4", **spec: Any) -> tuple[Any, list[str]]:
    """trainctl.launchers.gke.job.run_job on a GKE stack (gke-l4: 2 pods), through the real kubernetes
    client and a kubeconfig that points at the API; returns the result and the echoed lines."""
    from infra.providers.inventory import Inventory
    from infra.spec.stack_config import load_stack
    from trainctl.launchers.gke.job import run_job
    from trainctl.launchers.spec import LaunchSpec

    lines: list[str] = []
    inventory = Inventory(stack=stack, provider="gcp", nodes=(), bucket_uri="gs://bkt", ssh_private_key="",
                          known_hosts="", gke_service_account=GSA,
                          kubeconfig=str(api.write_kubeconfig(tmp_path / "kubeconfig")))
    launch = LaunchSpec(run_id=run_id, framework=framework, command=("python", "train.py"), **spec)
    result = run_job(load_stack(stack), inventory, launch, tmp_path / "runs" / run_id / "logs" / "launch",
                     echo or lines.append, poll=POLL, cancel=cancel)
    return result, lines
