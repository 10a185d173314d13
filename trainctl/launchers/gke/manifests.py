"""GKE stacks: the same launch spec becomes a headless Service + an Indexed Job.

Pod i of the Job gets the stable name <job>-<i>.<service>, so rank 0 is addressable before any
pod runs: torchrun meets at <job>-0.<service>:29400, TF_CONFIG lists every pod by that name, and
the Vertex AI job-dir variables point at the stack's bucket, exactly as on VM stacks.
The code runs from the container image (build it with your code, or install it in `command`).
"""

from __future__ import annotations

import json
import shlex
import threading
from typing import Any

from infra.spec import catalog
from infra.spec.cluster import ClusterSpec
from bootstrap.ssh import join, shell_env
from trainctl.launchers import rendezvous_store
from trainctl.launchers.cluster_env import TF_PORT, expand, job_env, thread_share, torchrun_target
from trainctl.launchers.gke.data_volumes import add_data
from trainctl.launchers.gke.gpudirect import apply as apply_gpudirect, gpudirect_pod
from trainctl.launchers.gke.jobset import (SINGLE, ClusterApis, as_jobset, child_job_name, jobset_name,
                                          jobset_unknown_fields, template_as_job)
from trainctl.launchers.gke.slice_jobs import is_multislice, slice_jobs
from trainctl.launchers.spec import LaunchSpec
from infra.providers.inventory import Inventory
from infra.spec.stack_config import ConfigError

RDZV_PORT = 29400
_KUBERNETES_IMPORT = threading.Lock()
CONTAINER = "trainer"  # the program's container in every pod (podFailurePolicy and logs name it)


def accelerator_kind(cluster: ClusterSpec) -> str:
    return "tpu" if cluster.tpu else "gpu" if cluster.gpu else "cpu"


def default_image(cluster: ClusterSpec, framework: str) -> str:
    kind = accelerator_kind(cluster)
    image = catalog.gke_image(framework, kind)
    if image is None:
        known = ", ".join(f"{f}/{k}" for f, k in sorted(catalog.GKE_IMAGES))
        raise ConfigError(f"no default GKE image for framework {framework!r} on a {kind} pool "
                         f"(defaults exist for {known}); pass an image built for it")
    return image


def gke_service_account(inventory: Inventory, given: str | None) -> str:
    """The Google service account the pods act as; without it bucket writes get 403."""
    email = given or inventory.gke_service_account
    if not email:
        raise ConfigError(f"stack {inventory.stack}: no GKE service account in the inventory "
                         "(output 'inventory.gke_service_account'); run `trainctl up` again")
    return email


def names(spec: LaunchSpec) -> tuple[str, str]:
    job = spec.run_id[:52]
    return job, f"{job}-svc"


def _torch_command(cluster: ClusterSpec, spec: LaunchSpec, job: str, svc: str, user: list[str]) -> str:
    rest = torchrun_target(user)
    # No agent hosts the c10d store: pod 0 runs it beside its agent, and it outlives every agent
    # (rendezvous_store.py), as on VM stacks.
    torchrun = ["torchrun", f"--nnodes={cluster.node_count}", f"--nproc-per-node={spec.nproc_per_node}",
                "--rdzv-backend=c10d", f"--rdzv-endpoint={job}-0.{svc}:{RDZV_PORT}", f"--rdzv-id={spec.run_id}",
                f"--rdzv-conf={rendezvous_store.RDZV_CONF}", f"--max-restarts={spec.max_restarts}", "--tee=3", *rest]
    hosted = rendezvous_store.hosting("python", "127.0.0.1", RDZV_PORT, torchrun)
    # Worker lines carry "[pod<index> r<rank>]:" as on VM stacks ("[node r<rank>]:"), so the log
    # streamer tells the program's lines from torchrun's own and finds its worker exit codes.
    prefix = 'export TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE="[pod${JOB_COMPLETION_INDEX} r\\${rank}]:"; '
    prefix += shell_env(rendezvous_store.agent_env(spec.env))
    return (prefix + f'if [ "$JOB_COMPLETION_INDEX" = 0 ]; then exec {join(hosted)}; else exec {join(torchrun)}; fi')


def _tf_prelude(cluster: ClusterSpec, job: str, svc: str) -> str:
    """TF_CONFIG from the pod's completion index: index 0 is the chief, the rest workers."""
    hosts = [f"{job}-{i}.{svc}:{TF_PORT}" for i in range(cluster.node_count)]
    chief, workers = json.dumps(hosts[:1]), json.dumps(hosts[1:])
    return ("if [ \"$JOB_COMPLETION_INDEX\" = 0 ]; then TASK='{\"type\":\"chief\",\"index\":0}'; "
            "else TASK=\"{\\\"type\\\":\\\"worker\\\",\\\"index\\\":$((JOB_COMPLETION_INDEX-1))}\"; fi; "
            f"export TF_CONFIG=\"{{\\\"cluster\\\":{{\\\"chief\\\":{_esc(chief)},"
            f"\\\"worker\\\":{_esc(workers)}}},\\\"task\\\":$TASK}}\"; ")


def _esc(text: str) -> str:
    return text.replace('"', '\\"')


def service_account(email: str, labels: dict[str, str]) -> dict[str, Any]:
    """The Kubernetes identity of the pods, bound by Workload Identity to the nodes' GSA."""
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": catalog.GKE_KSA_NAME, "namespace": catalog.GKE_KSA_NAMESPACE,
                         "labels": labels,
                         "annotations": {"iam.gke.io/gcp-service-account": email}}}


def _environment(inventory: Inventory, spec: LaunchSpec, pods: int) -> list[dict[str, str]]:
    """The Vertex AI job-dir variables, pointing at the stack's bucket, and the launch's env."""
    return [{"name": k, "value": v} for k, v in {
        **thread_share(inventory, spec, pods), **job_env(inventory, spec.run_id), "PYTHONUNBUFFERED": "1",
        **spec.env}.items()]


def _script(cluster: ClusterSpec, spec: LaunchSpec, job: str, svc: str, user: list[str],
            env: list[dict[str, str]]) -> str:
    """The container's bash script: on TPU hosts the program itself (PyTorch/XLA told its device
    in `env`), else under TF_CONFIG for TensorFlow or under torchrun."""
    if cluster.tpu:
        if spec.framework == "torch":
            env.append({"name": "PJRT_DEVICE", "value": "TPU"})
        return " ".join(shlex.quote(a) for a in user)
    if spec.framework == "tensorflow":
        return _tf_prelude(cluster, job, svc) + " ".join(shlex.quote(a) for a in user)
    return _torch_command(cluster, spec, job, svc, user)


def _accelerators(cluster: ClusterSpec) -> tuple[dict[str, str], dict[str, str]]:
    """The pod's resource limits and node selector for the pool's TPU slice or GPUs."""
    resources: dict[str, str] = {}
    node_selector: dict[str, str] = {}
    if cluster.tpu:
        tpu = catalog.TPUS[cluster.tpu.type]
        resources = {"google.com/tpu": str(tpu.chips_per_host)}
        node_selector = {"cloud.google.com/gke-tpu-accelerator": tpu.gke_accelerator or "",
                         "cloud.google.com/gke-tpu-topology": tpu.topology}
    if cluster.gpu:
        resources = {"nvidia.com/gpu": str(cluster.gpu.count)}
    return resources, node_selector


def _service(svc: str, labels: dict[str, str], spec: LaunchSpec, ports: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": svc, "labels": labels},
        # Headless: DNS names per pod, no load balancing.
        "spec": {"clusterIP": "None", "selector": {"trainctl/run": spec.run_id},
                 "ports": [{"name": p["name"], "port": p["containerPort"]} for p in ports],
                 "publishNotReadyAddresses": True},
    }


def _indexed_job(job: str, labels: dict[str, str], cluster: ClusterSpec, spec: LaunchSpec,
                 pod_spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": job, "labels": labels},
        "spec": {
            "completionMode": "Indexed", "completions": cluster.node_count,
            "parallelism": cluster.node_count,
            # Worker restarts map onto pod restarts inside the Job: one budget for the whole Job,
            # not per index, because the pods are one training program, as torchrun's
            # max_restarts is one budget for the worker group. Reruns of the whole Job
            # (job_retries) are trainctl's: it deletes a failed Job and creates it again.
            "backoffLimit": spec.max_restarts,
            "podFailurePolicy": pod_failure_policy(spec),
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        },
    }


def workload_names(cluster: ClusterSpec, spec: LaunchSpec, as_set: bool) -> tuple[str, str, str]:
    """The Job's (or JobSet's) name, the Service's, and the name the pods' hostnames start with
    (a JobSet's child Job of replicated job `w`; a multislice set names each slice's Job)."""
    job, svc = names(spec)
    if not as_set:
        return job, svc, job
    multi = is_multislice(cluster)
    assert not multi or cluster.tpu is not None
    rjobs = [f"s{i}" for i in range(cluster.tpu.slices)] if multi and cluster.tpu else [SINGLE]
    pods = catalog.TPUS[cluster.tpu.type].hosts if multi and cluster.tpu else cluster.node_count
    name = jobset_name(spec.run_id, rjobs, pods)
    return name, svc, name if multi else child_job_name(name, SINGLE)


def manifests(cluster: ClusterSpec, inventory: Inventory, spec: LaunchSpec, image: str | None = None,
              gsa: str | None = None, apis: ClusterApis | None = None) -> list[dict[str, Any]]:
    """The ServiceAccount, the Service, and the job: a JobSet where a Kueue queue is named or the
    cluster serves the JobSet API (`apis`, from its discovery), else the Indexed Job(s)."""
    as_set = bool(spec.queue) or bool(apis and apis.jobset)
    name, svc, job = workload_names(cluster, spec, as_set)
    email = gke_service_account(inventory, gsa)
    image = image or spec.image or default_image(cluster, spec.framework)
    labels = {"app.kubernetes.io/managed-by": "trainctl", "trainctl/run": spec.run_id}
    user = expand(spec.command, inventory, spec.run_id)
    env = _environment(inventory, spec, cluster.node_count)
    script = _script(cluster, spec, job, svc, user, env)
    resources, node_selector = _accelerators(cluster)
    ports = [{"containerPort": RDZV_PORT, "name": "rdzv"}, {"containerPort": TF_PORT, "name": "tf"}]
    pod_spec: dict[str, Any] = {
        "subdomain": svc, "restartPolicy": "Never",
        "serviceAccountName": catalog.GKE_KSA_NAME,
        "containers": [{
            "name": CONTAINER, "image": image,
            "command": ["bash", "-c", script], "env": env, "ports": ports,
            "resources": {"limits": resources} if resources else {},
        }],
    }
    if node_selector:
        pod_spec["nodeSelector"] = node_selector
    indexed = _indexed_job(job, labels, cluster, spec, pod_spec)
    with_gpudirect(cluster, inventory, indexed["spec"]["template"])
    add_data(spec.data, indexed["spec"]["template"])
    jobs = slice_jobs(cluster, indexed, svc, "-0" if as_set else "") if is_multislice(cluster) else [indexed]
    if as_set:
        jobs = [as_jobset(name, labels, jobs, svc, spec.queue, spec.priority_class)]
    elif spec.priority_class:
        for one in jobs:
            one["spec"]["template"]["spec"]["priorityClassName"] = spec.priority_class
    return [service_account(email, labels), _service(svc, labels, spec, ports), *jobs]


def with_gpudirect(cluster: ClusterSpec, inventory: Inventory, template: dict[str, Any]) -> None:
    """A GPUDirect pool's networks, sidecar, volumes and NCCL environment, merged into the pods."""
    parts = gpudirect_pod(cluster, simulated=any(n.simulates is not None for n in inventory.nodes))
    if parts is None:
        return
    apply_gpudirect(template["spec"], template["metadata"], parts)
    command = template["spec"]["containers"][0]["command"]
    command[-1] = parts.preamble + command[-1]


def pod_failure_policy(spec: LaunchSpec) -> dict[str, Any]:
    """Rules are matched in order. A disrupted pod (preempted, evicted, its node drained) is
    replaced without spending the restart budget, whatever its exit code; a permanent exit code
    (a usage error, bad config) fails the Job at once instead of burning every restart."""
    rules: list[dict[str, Any]] = [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]
    # The API wants the values sorted, unique, and without 0 under operator In.
    codes = sorted({c for c in spec.permanent_exit_codes if c != 0})
    if codes:
        rules.append({"action": "FailJob", "onExitCodes": {
            "containerName": CONTAINER, "operator": "In", "values": codes}})
    return {"rules": rules}


def unknown_fields(raw: Any, known: Any, path: str = "") -> list[str]:
    """Paths present in `raw` that the typed model dropped: fields the API does not know."""
    if isinstance(raw, dict) and isinstance(known, dict):
        return [p for k, v in raw.items() if v is not None
                for p in ([path + k] if k not in known else unknown_fields(v, known[k], f"{path}{k}."))]
    if isinstance(raw, list) and isinstance(known, list):
        return [p for i, (r, k) in enumerate(zip(raw, known))
                for p in unknown_fields(r, k, f"{path.rstrip('.')}[{i}].")]
    return []


def import_kubernetes() -> None:
    """The kubernetes client, imported under a lock: its packages import their modules lazily,
    and two threads that import it first at once (a sweep's parallel trials, each a Job) can
    stop with _DeadlockError on kubernetes.client.api_client."""
    with _KUBERNETES_IMPORT:
        import kubernetes.client.api_client  # noqa: F401
        import kubernetes.config  # noqa: F401
        import kubernetes.watch  # noqa: F401


def validate(manifest: dict[str, Any]) -> Any:
    """Deserialize into the Kubernetes client's typed models: unknown fields, wrong types and
    missing required fields raise, as the API server would."""
    if manifest["kind"] == "JobSet":  # no client model: its API's fields, and each child Job's
        unknown = jobset_unknown_fields(manifest)
        if unknown:
            raise ValueError(f"JobSet {manifest['metadata'].get('name')}: unknown field(s) " + ", ".join(unknown))
        for index in range(len(manifest["spec"]["replicatedJobs"])):
            validate(template_as_job(manifest, index))
        return manifest
    import_kubernetes()
    from kubernetes.client import ApiClient

    kinds = {"ServiceAccount": "V1ServiceAccount", "Service": "V1Service", "Job": "V1Job"}
    client = ApiClient()
    client.configuration.client_side_validation = True
    model = client.deserialize(json.dumps(manifest), kinds[manifest["kind"]], "application/json")
    # The models drop fields they do not know instead of refusing them; the API server (with
    # fieldValidation=Strict, as trainctl sends) answers 400.
    unknown = unknown_fields(manifest, client.sanitize_for_serialization(model))
    if unknown:
        raise ValueError(f"{manifest['kind']} {manifest['metadata'].get('name')}: unknown field(s) "
                         + ", ".join(unknown))
    return model
