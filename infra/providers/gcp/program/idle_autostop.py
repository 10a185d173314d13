"""Idle autostop of a GCP VM stack (`idle_minutes`): a watch on node 0, and the one grant it needs.

Node 0's startup script (GCE runs it as root at every boot, so a restarted node watches again)
writes the watch's source (node_idle_watch.py with the shared rule, idle_rule.py) under /run
and runs it as a systemd unit where systemd runs (GCE's images), else detached with a pid file
(the simulator's nodes); either way a second run replaces the first instead of adding one.

When the stack has sat idle, the watch marks the stack's VMs expired and the reaper deletes
them. The nodes' account gets no delete right for that: a custom role with the two
permissions setLabels takes (instances.get for the label fingerprint, instances.setLabels),
bound on the project under an IAM condition naming this stack's VMs one by one (resource
names as IAM Conditions spell them: projects/P/zones/Z/instances/N,
https://cloud.google.com/iam/docs/conditions-resource-attributes). Relabelling its own VMs
lets a node hasten its own stack's end, which `idle_minutes` asked for, and nothing more.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pulumi
import pulumi_gcp as gcp

from infra.providers.gcp.program.compute import node_name
from infra.providers.gcp.reaper import API_ENDPOINT_ENV
from infra.providers.gcp.private_endpoints import NODE_API_ENDPOINT_ENV
from infra.spec.cluster import ClusterSpec

IDLE_WATCH_PERMISSIONS = ("compute.instances.get", "compute.instances.setLabels")
CONFIG_ATTRIBUTE = "trainctl-idle-watch"
GOOGLE_COMPUTE = "https://compute.googleapis.com/compute/v1/"
WATCH_DIR = "/run/trainctl-idle"
UNIT = "trainctl-idle-watch.service"
# A runtime unit (/run/systemd/system): gone at reboot, when the startup script writes it again.
SYSTEMD_UNIT = f"""[Unit]
Description=trainctl idle watch
After=network-online.target
[Service]
Environment=PYTHONPATH={WATCH_DIR}
ExecStart=/usr/bin/python3 -m infra.providers.gcp.node_idle_watch
Restart=on-failure
RestartSec=10
"""
PROVIDERS = Path(__file__).resolve().parents[2]  # infra/providers
SOURCES = {"infra/providers/idle_rule.py": PROVIDERS / "idle_rule.py",
           "infra/providers/gcp/node_idle_watch.py": PROVIDERS / "gcp" / "node_idle_watch.py"}


def watched(spec: ClusterSpec) -> bool:
    return spec.idle_minutes is not None and not spec.ephemeral  # a run's own stack goes with the run


def instance_names(spec: ClusterSpec) -> list[str]:
    return [node_name(spec, i) for i in range(spec.node_count)]


def idle_role_id(spec: ClusterSpec) -> str:
    """Custom role ids take letters, digits, '_' and '.', 3-64 characters."""
    return f"trainctlIdleWatch_{spec.name.replace('-', '_')}"[:64]


def condition_expression(spec: ClusterSpec) -> str:
    names = " || ".join(f'resource.name == "projects/{spec.project}/zones/{spec.zone}/instances/{n}"'
                        for n in instance_names(spec))
    return f'resource.type == "compute.googleapis.com/Instance" && ({names})'


def compute_endpoint() -> str:
    base = os.environ.get(NODE_API_ENDPOINT_ENV) or os.environ.get(API_ENDPOINT_ENV)
    return f"{base.rstrip('/')}/compute/v1/" if base else GOOGLE_COMPUTE


def watch_config(spec: ClusterSpec) -> str:
    assert spec.idle_minutes is not None
    return json.dumps({"idle_seconds": spec.idle_minutes * 60, "instances": instance_names(spec),
                       "compute_endpoint": compute_endpoint()}, sort_keys=True)


def startup_script() -> str:
    files = "".join(f"mkdir -p {WATCH_DIR}/{Path(path).parent}\ncat > {WATCH_DIR}/{path} <<'TRAINCTL_EOF'\n"
                    f"{source.read_text()}TRAINCTL_EOF\n" for path, source in SOURCES.items())
    inits = " ".join(f"{WATCH_DIR}/{d}/__init__.py" for d in ("infra", "infra/providers", "infra/providers/gcp"))
    run = f"PYTHONPATH={WATCH_DIR} python3 -m infra.providers.gcp.node_idle_watch"
    return f"""#!/bin/bash
# trainctl: the stack's idle watch (idle_minutes), on node 0 only
set -eu
{files}touch {inits}
if [ -d /run/systemd/system ]; then
  cat > /run/systemd/system/{UNIT} <<'TRAINCTL_EOF'
{SYSTEMD_UNIT}TRAINCTL_EOF
  systemctl daemon-reload
  systemctl restart {UNIT}
else
  if [ -f {WATCH_DIR}/pid ] && kill "$(cat {WATCH_DIR}/pid)" 2>/dev/null; then sleep 0.2; fi
  {run} >>{WATCH_DIR}/watch.log 2>&1 </dev/null &
  echo $! > {WATCH_DIR}/pid
fi
"""


def node_metadata(spec: ClusterSpec) -> dict[int, dict[str, str]]:
    """Extra instance metadata by node index: node 0's watch and its settings."""
    if not watched(spec):
        return {}
    return {0: {CONFIG_ATTRIBUTE: watch_config(spec), "startup-script": startup_script()}}


def grant_idle_watch(spec: ClusterSpec, member: pulumi.Input[str], opts: pulumi.ResourceOptions) -> None:
    """The nodes' account may read and relabel this stack's VMs, nothing else of the project."""
    if not watched(spec):
        return
    role = gcp.projects.IAMCustomRole(
        f"{spec.name}-idle-watch-role", project=spec.project, role_id=idle_role_id(spec),
        title=f"trainctl idle watch of {spec.name}", permissions=list(IDLE_WATCH_PERMISSIONS), opts=opts)
    gcp.projects.IAMMember(
        f"{spec.name}-idle-watch-grant", project=spec.project,
        role=f"projects/{spec.project}/roles/{idle_role_id(spec)}", member=member,
        condition=gcp.projects.IAMMemberConditionArgs(
            title="this stack's VMs", expression=condition_expression(spec),
            description=f"the idle watch on {node_name(spec, 0)} marks its stack expired"),
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[role])))
