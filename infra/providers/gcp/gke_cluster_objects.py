"""The Kubernetes objects trainctl itself makes on a GKE stack's cluster once `up` has made the
cluster: for a GPUDirect pool, the multi-networking objects of its extra networks and the
DaemonSets that install the NCCL plugin (infra/spec/gke_gpudirect.py, gke_gpudirect_installers.py).
`plan` lists them, `up` creates them through the stack's kubeconfig (an object already there is
kept: `up` again, or an adopted stack), `down` deletes them before the cluster goes. Pulumi's
program does not declare them: they live inside the cluster, which the program only asks for.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

from infra.errors import ProvisionError
from infra.providers.protocol import PlanRow, Progress
from infra.spec.cluster import ClusterSpec
from infra.spec.gke_gpudirect import GROUP, network_objects
from infra.spec.gke_gpudirect_installers import installers

PLURALS = {"GKENetworkParamSet": "gkenetworkparamsets", "Network": "networks"}


def declared(spec: ClusterSpec) -> list[dict[str, Any]]:
    """In creation order: parameter sets, the Networks naming them, then the DaemonSets."""
    return network_objects(spec) + installers(spec)


def plan_rows(spec: ClusterSpec) -> list[PlanRow]:
    rows = []
    for obj in declared(spec):
        spec_ = obj["spec"]
        values = ({k: spec_[k] for k in ("vpc", "vpcSubnet", "deviceMode")} if obj["kind"] == "GKENetworkParamSet"
                  else {"parametersRef": spec_["parametersRef"]["name"]} if obj["kind"] == "Network"
                  else {"namespace": obj["metadata"]["namespace"],
                        "images": [c["image"] for c in spec_["template"]["spec"].get("initContainers", [])
                                   + spec_["template"]["spec"]["containers"]]})
        rows.append(PlanRow(f"kubernetes/{obj['kind']}", obj["metadata"]["name"], values))
    return rows


def write_kubeconfig(state: Path, outputs: dict[str, Any]) -> Path | None:
    """The program's kubeconfig output, readable by the user only, or None (not a GKE stack)."""
    if "kubeconfig" not in outputs:
        return None
    path = state / "kubeconfig"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(outputs["kubeconfig"])
    return path


class _Cluster:
    def __init__(self, kubeconfig: Path) -> None:
        from kubernetes import client, config

        api = config.new_client_from_config(config_file=str(kubeconfig), persist_config=False)
        self.custom, self.apps = client.CustomObjectsApi(api), client.AppsV1Api(api)

    def create(self, obj: dict[str, Any]) -> None:
        if obj["kind"] == "DaemonSet":
            self.apps.create_namespaced_daemon_set(obj["metadata"]["namespace"], obj,  # type: ignore[arg-type]
                                                   field_validation="Strict")  # a dict is sent as it is
        else:
            self.custom.create_cluster_custom_object(GROUP, "v1", PLURALS[obj["kind"]], obj, field_validation="Strict")

    def delete(self, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        if obj["kind"] == "DaemonSet":
            self.apps.delete_namespaced_daemon_set(name, obj["metadata"]["namespace"], _preload_content=False)
        else:
            self.custom.delete_cluster_custom_object(GROUP, "v1", PLURALS[obj["kind"]], name)


def _each(objects: list[dict[str, Any]], call: Callable[[dict[str, Any]], None], tolerated: int) -> list[str]:
    """Call for every object; an answer of status `tolerated` (409 on create, 404 on delete) is fine."""
    from kubernetes.client.exceptions import ApiException

    done = []
    for obj in objects:
        try:
            call(obj)
            done.append(f"{obj['kind']} {obj['metadata']['name']}")
        except ApiException as exc:
            if exc.status != tolerated:
                raise
    return done


def apply(spec: ClusterSpec, kubeconfig: Path | None, progress: Progress) -> None:
    objects = declared(spec)
    if not objects or kubeconfig is None:
        return
    from kubernetes.client.exceptions import ApiException

    try:
        made = _each(objects, _Cluster(kubeconfig).create, 409)
    except ApiException as exc:
        raise ProvisionError(f"stack {spec.name}: the cluster refused its GPUDirect objects ({exc.status} "
                             f"{exc.reason}: {exc.body}); `trainctl up` again retries, `trainctl down` removes "
                             "the stack") from exc
    progress(f"cluster objects: {len(made)} created, {len(objects) - len(made)} already there "
             f"({', '.join(sorted({o['kind'] for o in objects}))})")


def remove(meta: dict[str, Any] | None, state: Path, progress: Progress) -> None:
    """Delete what `apply` made, newest first. Never fatal: the cluster's deletion that follows
    takes whatever is left with it; a failure is said, not raised."""
    kubeconfig = state / "kubeconfig"
    if not meta or not meta.get("spec") or not kubeconfig.is_file():
        return
    objects = declared(ClusterSpec.model_validate(meta["spec"]))
    if not objects:
        return
    try:
        gone = _each(list(reversed(objects)), _Cluster(kubeconfig).delete, 404)
        progress(f"cluster objects: {len(gone)} deleted")
    except Exception as exc:  # noqa: BLE001 - said, and the cluster's deletion removes them anyway
        progress(f"cluster objects not deleted ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
                 "they go with the cluster")
