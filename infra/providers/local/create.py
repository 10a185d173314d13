"""`up`'s work: the rows `plan` declares, made one role at a time, each recorded (intent) in the
stack's state before it exists, then the nodes waited for and the inventory written.

Firewall rules from the spec become iptables rules inside each namespace (firewall.py).
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from namespace_nodes import keys
from infra.providers.inventory import Inventory, Node, Registry
from namespace_nodes import metadata, netns, sshd
from infra.providers.local import registry
from infra.providers.local.firewall import bucket_rules, node_rules, registry_rules
from infra.providers.local.instance_metadata import published_host_keys, start_metadata_server
from infra.providers.local.layout import (EMULATOR_PORT, NODE_IFNAME, RENDEZVOUS_PORT, Addresses, LocalStackError,
                                          Names, pick_subnet)
from infra.providers.local.plan import plan, record_of
from infra.providers.local.state import StackState
from infra.providers.offline_uv import offline_uv_env
from infra.providers.protocol import PlanRow, Progress
from infra.providers.stack_home import cache_dir, global_lock, state_dir
from infra.spec.cluster import ClusterSpec
from infra.spec.stack_config import ConfigError

PORT_WAIT_SECONDS = 20.0


@dataclass
class Creation:
    """One `up` in progress: what the steps share. `addr` is known once the bridge has its subnet."""

    spec: ClusterSpec
    state: StackState
    progress: Progress
    addr: Addresses = field(init=False)
    registry: Registry | None = None

    @property
    def names(self) -> Names:
        return Names(self.spec.name)

    @property
    def sdir(self) -> Path:
        return self.state.path.parent

    @property
    def node_ips(self) -> list[str]:
        return self.addr.nodes(self.spec.node_count)


def create(spec: ClusterSpec, state: StackState, progress: Progress) -> Inventory:
    """Make every row of the stack's plan, in its order; each step makes the rows of one role."""
    run = Creation(spec, state, progress)
    cache_dir().mkdir(parents=True, exist_ok=True)
    for role, rows in itertools.groupby(plan(spec), key=lambda row: row.values["role"]):
        STEPS[role](run, list(rows))
    _wait_for_answers(run)
    host_keys = published_host_keys(run.addr, [run.names.node(i) for i in range(spec.node_count)], progress)
    return _write_inventory(run, host_keys)


def _client_keys(run: Creation, rows: list[PlanRow]) -> None:
    """The stack's directory (made with its state) gets the client's keys first: nothing on the
    network exists yet, and the inventory pins them from the start."""
    client_pub = keys.write_ed25519_keypair(run.sdir / "keys" / "id_ed25519", f"trainctl@{run.spec.name}")
    authorized = run.sdir / "keys" / "authorized_keys"
    authorized.write_text(client_pub + "\n")
    os.chmod(authorized, 0o600)


def _bridge(run: Creation, rows: list[PlanRow]) -> None:
    for row in rows:
        with global_lock():  # two stacks picking a subnet at once would pick the same
            subnet = pick_subnet(run.spec.name)
            run.addr = Addresses(subnet)
            run.state.data["subnet"] = str(subnet)
            record = run.state.intend(row.kind, **record_of(row))
            if netns.link_exists(row.name):
                raise LocalStackError(f"interface {row.name} already exists: another stack's "
                                      f"name hashes alike; choose another stack name")
            netns.create_bridge(row.name, run.addr.cidr(run.addr.controller))
            run.state.created(record)
        run.progress(f"bridge {row.name} {subnet}")


def _forward_rule(run: Creation, rows: list[PlanRow]) -> None:
    for row in rows:
        record = run.state.intend(row.kind, **record_of(row))
        netns.add_host_rule(row.values["rule"])
        run.state.created(record)


def _namespace(run: Creation, row: PlanRow, ip: str) -> None:
    record = run.state.intend(row.kind, **record_of(row))
    netns.create_node_netns(row.name, row.values["veth"], run.names.bridge, run.addr.cidr(ip))
    run.state.created(record)


def _bucket(run: Creation, rows: list[PlanRow]) -> None:
    """The bucket: an emulator in its own namespace, reachable only from the cluster, beside the
    metadata server."""
    for row in rows:
        _namespace(run, row, run.addr.bucket)
        netns.apply_iptables(row.name, bucket_rules(run.addr, run.node_ips))
        _start_emulator(run.names, run.addr, run.sdir)
        start_metadata_server(run.spec, run.names, run.addr, run.sdir)


def _registry(run: Creation, rows: list[PlanRow]) -> None:
    """The stack's image registry: reachable from the controller and the nodes only, its
    certificate trusted through the stack's cert dir (which local nodes see at the same path)."""
    for row in rows:
        _namespace(run, row, run.addr.registry)
        netns.apply_iptables(row.name, registry_rules(run.addr, run.node_ips))
        rdir = run.sdir / "registry"
        registry.seed(rdir / "data", cache_dir() / "registry")
        cert_dir, key = rdir / "certs", rdir / "tls" / "registry.key"
        registry.write_certificate(cert_dir, key, run.addr.registry, run.names.stack)
        conf = rdir / "config.yml"
        served = f"{run.addr.registry}:{registry.REGISTRY_PORT}"
        conf.write_text(registry.config(rdir / "data", served, cert_dir / "ca.crt", key))
        registry.start(row.name, conf, rdir / "registry.log")
        run.registry = Registry(repository=f"{served}/trainctl", cert_dir=str(cert_dir), per_stack=True)


def _hosts_files(run: Creation, rows: list[PlanRow]) -> None:
    """`ip netns exec` bind-mounts /etc/netns/<ns>/hosts over /etc/hosts: nodes resolve each
    other by name (as GCE's internal DNS does) and reverse lookups of peers succeed."""
    hosts = hosts_file(run.names, run.addr, run.spec.node_count)
    for row in rows:
        run.state.intend(row.kind, **record_of(row))
        Path(row.name).mkdir(parents=True, exist_ok=True)
        (Path(row.name) / "hosts").write_text(hosts)


def _nodes(run: Creation, rows: list[PlanRow]) -> None:
    """Intent for every node is on disk before any of them is created; they boot at once."""
    records = [run.state.intend(row.kind, **record_of(row)) for row in rows]
    with ThreadPoolExecutor(max_workers=min(16, len(rows))) as pool:
        list(pool.map(lambda i: start_node(run.names, run.addr, run.sdir, i, run.node_ips), range(len(rows))))
    for record in records:
        run.state.created(record)


# Each role a plan row has, and the step that makes the rows of that role.
STEPS: dict[str, Callable[[Creation, list[PlanRow]], None]] = {
    "state": _client_keys, "bridge": _bridge, "forward": _forward_rule, "bucket": _bucket,
    "registry": _registry, "hosts": _hosts_files, "node": _nodes}


def start_node(names: Names, addr: Addresses, sdir: Path, i: int, node_ips: list[str]) -> None:
    """Boot node i: a new disk (keys, home, workdir) unless it still has one (a stopped node
    started again), its namespace unless it still exists, then the machine itself."""
    ns = names.node_netns(i)
    ndir = sdir / "nodes" / names.node(i)
    for sub in ("root", "tmp", "work"):
        (ndir / sub).mkdir(parents=True, exist_ok=True)
    os.chmod(ndir / "root", 0o700)
    os.chmod(ndir / "tmp", 0o1777)
    host_key = ndir / "ssh_host_ed25519_key"
    if not host_key.exists():
        keys.write_ed25519_keypair(host_key, ns)
    config = ndir / "sshd_config"
    config.write_text(sshd.sshd_config(addr.node(i), host_key, sdir / "keys" / "authorized_keys"))
    if not netns.netns_exists(ns):
        netns.create_node_netns(ns, names.veth(i), names.bridge, addr.cidr(addr.node(i)), NODE_IFNAME)
        # GCE's metadata address, served from the bucket's namespace (namespace_nodes/metadata.py)
        netns.run(["ip", "route", "add", f"{metadata.METADATA_IP}/32", "via", addr.bucket], netns=ns)
    netns.apply_iptables(ns, node_rules(addr, node_ips, [f"{addr.controller}/32"]))
    sshd.boot_node(ns, names.node(i), ndir / "root", ndir / "tmp", config, ndir / "sshd.log",
                   host_key.with_name(host_key.name + ".pub"))


def _wait_for_answers(run: Creation) -> None:
    waits = [(f"node {i}", ip, 22) for i, ip in enumerate(run.node_ips)]
    waits.append(("bucket emulator", run.addr.bucket, EMULATOR_PORT))
    if run.registry:
        waits.append(("registry", run.addr.registry, registry.REGISTRY_PORT))
    with ThreadPoolExecutor(max_workers=len(waits)) as pool:
        answered = list(pool.map(lambda w: sshd.wait_for_port(w[1], w[2], PORT_WAIT_SECONDS), waits))
    late = [w[0] for w, ok in zip(waits, answered) if not ok]
    if late:
        raise LocalStackError(f"not answering after 20 s: {', '.join(late)} "
                              f"(logs under {run.sdir / 'nodes'})")
    run.progress(f"{run.spec.node_count} node(s) answering on :22, bucket gs://{run.names.bucket}")


def _write_inventory(run: Creation, host_keys: dict[str, list[str]]) -> Inventory:
    names, addr, sdir = run.names, run.addr, run.sdir
    inventory = Inventory(
        stack=run.spec.name,
        provider="local",
        nodes=tuple(
            Node(name=names.node(i), rank=i, internal_ip=addr.node(i), ssh_host=addr.node(i),
                 ssh_user="root", host_keys=tuple(host_keys[names.node(i)]), accelerator="cpu",
                 workdir=str(sdir / "nodes" / names.node(i) / "work"), interface=NODE_IFNAME, task=task)
            for i, (task, _) in enumerate(run.spec.node_tasks)),
        bucket_uri=f"gs://{names.bucket}",
        storage_emulator_host=f"http://{addr.bucket}:{EMULATOR_PORT}",
        ssh_private_key=str(sdir / "keys" / "id_ed25519"),
        known_hosts=str(sdir / "keys" / "known_hosts"),
        rendezvous_port=RENDEZVOUS_PORT,
        node_env=_node_env(addr, cache_dir()),
        offline_nodes=True,
        on_controller=True,
        shared_root=str(sdir / "shared"),
        registry=run.registry,
    )
    Path(inventory.known_hosts).write_text("\n".join(inventory.known_hosts_lines()) + "\n")
    os.chmod(inventory.known_hosts, 0o600)
    inventory.write(sdir / "inventory.json")
    return inventory


def inventory(stack: str) -> Inventory:
    """The inventory `up` wrote for the stack."""
    path = state_dir(stack) / "inventory.json"
    if not path.exists():
        raise ConfigError(f"stack {stack!r} is not up (no {path}); run `trainctl up --stack {stack}`")
    return Inventory.read(path)


def hosts_file(names: Names, addr: Addresses, count: int) -> str:
    """What a VM's resolver knows: every cluster name, forward and reverse.

    Dual-stack listeners (torch's c10d store) see IPv4 peers as ::ffff:a.b.c.d, and glibc's
    hosts file answers a reverse lookup of that form only from a line of its own; without it the
    lookup falls through to a DNS server nodes cannot reach, and c10d warns on every connection
    ("The hostname of the client socket cannot be retrieved")."""
    named = [(addr.bucket, "bucket"), *((addr.node(i), names.node(i)) for i in range(count))]
    lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback",
             f"{metadata.METADATA_IP} {metadata.METADATA_HOST} metadata"]
    lines += [f"{ip} {name}" for ip, name in named]
    lines += [f"::ffff:{ip} {name}" for ip, name in named]
    return "\n".join(lines) + "\n"


def _node_env(addr: Addresses, cache: Path) -> dict[str, str]:
    return {
        "STORAGE_EMULATOR_HOST": f"http://{addr.bucket}:{EMULATOR_PORT}",
        # gcsfs otherwise probes buckets over gRPC/TLS and stalls ~60 s per call on the emulator.
        "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
        **offline_uv_env(cache),
    }


def _start_emulator(names: Names, addr: Addresses, sdir: Path) -> None:
    exe = shutil.which("gcp-storage-emulator", path=str(Path(sys.executable).parent))
    if exe is None:
        raise LocalStackError("gcp-storage-emulator is not installed beside this Python "
                              "(run `make deps`)")
    log = open(sdir / "emulator.log", "ab")
    subprocess.run(
        ["setsid", "-f", "ip", "netns", "exec", names.bucket_netns, exe, "start",
         "--host", addr.bucket, "--port", str(EMULATOR_PORT), "--in-memory",
         "--default-bucket", names.bucket],
        check=True, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
