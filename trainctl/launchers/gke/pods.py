"""What trainctl makes of one pod of a GKE attempt: the last state seen of it, and what its
status says (started, terminated, waiting for a reason worth telling, disrupted)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainctl.launchers.gke.manifests import CONTAINER
from trainctl.launchers.lines import LinePrinter

QUIET_WAITS = ("ContainerCreating", "PodInitializing")  # waiting reasons not worth a message


@dataclass
class PodSeen:
    """The last state seen of one pod of the attempt, and its log stream."""
    name: str
    index: int
    seq: int  # the order in which trainctl first saw it
    obj: Any  # V1Pod
    printer: LinePrinter | None = None
    ended: bool = False  # its log stream has ended
    gone: bool = False  # deleted from the API
    said: str = ""  # the last waiting reason or exit reported for it


def container_status(pod: Any) -> Any:
    """The trainer container's status (V1ContainerStatus), or None before it has one."""
    statuses = (pod.status.container_statuses if pod.status else None) or []
    return next((s for s in statuses if s.name == CONTAINER), None)


def _conditions(pod: Any) -> list[Any]:
    return list((pod.status.conditions if pod.status else None) or [])


def terminated_state(pod: Any) -> Any:
    """The trainer container's terminated state (V1ContainerStateTerminated), or None."""
    status = container_status(pod)
    return status.state.terminated if status and status.state else None


def has_started(pod: Any) -> bool:
    status = container_status(pod)
    return bool(status and status.state and (status.state.running or status.state.terminated))


def waiting_reason(pod: Any) -> str:
    """Why the pod is not running yet, when it is worth telling (scheduling, image pull)."""
    for cond in _conditions(pod):
        if cond.type == "PodScheduled" and cond.status == "False":
            return f"{cond.reason}: {cond.message}"
    status = container_status(pod)
    waiting = status.state.waiting if status and status.state else None
    if waiting and waiting.reason not in QUIET_WAITS:
        return f"{waiting.reason}: {waiting.message or ''}".rstrip(": ")
    return ""


def disruption(pod: Any) -> str:
    for cond in _conditions(pod):
        if cond.type == "DisruptionTarget" and cond.status == "True":
            return str(cond.reason or "disrupted")
    return ""
