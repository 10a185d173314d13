"""The local realizer: a ClusterSpec becomes namespaces, sshds and a GCS emulator on this machine.

Layout of a stack with N nodes on subnet 10.210.S.0/24 (S derived from the stack name):
  bridge  tcb<hash>     10.210.S.1   the controller's address (this process, root namespace)
  netns   tc-<stack>-bucket  .2     the GCS emulator (the bucket) and the GCE metadata server
  netns   tc-<stack>-registry .3    the container registry (docker-registry, TLS)
  netns   tc-<stack>-n<i>    .10+i  node i: sshd as PID 1 of its own PID + mount namespace
Firewall rules from the spec become iptables rules inside each namespace.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from infra.providers import keys
from infra.spec.cost import Estimate
from infra.errors import CapacityUnavailable, ProvisionError
from infra.providers.inventory import Inventory, Node, Registry
from infra.providers.host_keys import key_lines, wait_for_host_keys
from infra.providers.local import metadata, metadata_admin, netns, registry, sshd
from infra.providers.offline_uv import offline_uv_env
from infra.providers.local.state import StackState, load_state, new_state
from infra.providers.protocol import Capabilities, PlanRow, Progress, StackInfo
from infra.spec.cluster import ClusterSpec
from infra.spec.stack_config import ConfigError
from infra.providers.stack_home import (cache_dir, discard, global_lock, kill_clients, mark_deleting, recorded_provider,
                               stack_lock, stacks_with_state, state_dir)

POOL = ipaddress.IPv4Network("10.210.0.0/16")
EMULATOR_PORT = 9023
RENDEZVOUS_PORT = 29400
NODE_IFNAME = "eth0"
# CPU wheels that lie on this machine's disk (torch among them): nodes install from here first.


class LocalStackError(ProvisionError):
    pass


def require_root() -> None:
    if os.geteuid() != 0:
        raise ConfigError(
            "the local stack needs root (or CAP_NET_ADMIN + CAP_SYS_ADMIN): it creates network "
            "namespaces, veth pairs, a bridge and iptables rules, and starts one sshd per node "
            "in its own mount/PID namespace. Run it with sudo, or use a gcp stack.")


@dataclass(frozen=True)
class Names:
    stack: str

    @property
    def digest(self) -> str:
        return hashlib.sha1(self.stack.encode()).hexdigest()

    @property
    def bridge(self) -> str:
        return f"tcb{self.digest[:8]}"

    def veth(self, index: int) -> str:
        return f"tcv{self.digest[:6]}n{index}"  # <= 12 chars; the peer adds "p" (IFNAMSIZ 15)

    def node(self, index: int) -> str:
        return f"node{index}"

    def node_netns(self, index: int) -> str:
        return f"tc-{self.stack}-n{index}"

    @property
    def bucket_netns(self) -> str:
        return f"tc-{self.stack}-bucket"

    @property
    def bucket_veth(self) -> str:
        return f"tcv{self.digest[:6]}bk"

    @property
    def bucket(self) -> str:
        return f"trainctl-{self.stack}"

    @property
    def registry_netns(self) -> str:
        return f"tc-{self.stack}-registry"

    @property
    def registry_veth(self) -> str:
        return f"tcv{self.digest[:6]}rg"

    @property
    def netns_prefix(self) -> str:
        return f"tc-{self.stack}-"


@dataclass(frozen=True)
class Addresses:
    subnet: ipaddress.IPv4Network

    @property
    def controller(self) -> str:
        return str(self.subnet.network_address + 1)

    @property
    def bucket(self) -> str:
        return str(self.subnet.network_address + 2)

    @property
    def registry(self) -> str:
        return str(self.subnet.network_address + 3)

    def node(self, index: int) -> str:
        return str(self.subnet.network_address + 10 + index)

    def cidr(self, ip: str) -> str:
        return f"{ip}/{self.subnet.prefixlen}"


def pick_subnet(stack: str) -> ipaddress.IPv4Network:
    """A /24 of the pool derived from the stack name, skipping any that is in use on this host."""
    used = [ipaddress.IPv4Interface(a).network for a in netns.used_ipv4_networks()]
    subnets: list[ipaddress.IPv4Network] = list(POOL.subnets(new_prefix=24))
    start = int(hashlib.sha1(stack.encode()).hexdigest(), 16) % len(subnets)
    for offset in range(len(subnets)):
        candidate = subnets[(start + offset) % len(subnets)]
        if not any(candidate.overlaps(u) for u in used):
            return candidate
    raise LocalStackError(f"no free /24 left in {POOL} for stack {stack!r}")


# ---------------------------------------------------------------------------------------------
# plan


def plan(spec: ClusterSpec) -> list[PlanRow]:
    """What `up` would create, in order, without touching the machine."""
    names = Names(spec.name)
    resources = [
        PlanRow("dir", str(state_dir(spec.name))),
        PlanRow("bridge", names.bridge, {"subnet": "10.210.x.0/24 (derived, free)"}),
        PlanRow("host_rule", values={"rule": netns.host_forward_rule(names.bridge)}),
        PlanRow("netns", names.bucket_netns, {"role": "bucket", "service": f"gcs-emulator :{EMULATOR_PORT}",
                                               "bucket": f"gs://{names.bucket}"}),
    ]
    if registry.available():
        resources.append(PlanRow("netns", names.registry_netns, {
            "role": "registry", "service": f"docker-registry :{registry.REGISTRY_PORT} (TLS)"}))
    for i in range(spec.node_count):
        resources.append(PlanRow("netns", names.node_netns(i), {
            "role": "node", "node": names.node(i), "service": "sshd :22", "firewall": firewall_summary()}))
    return resources


def capabilities(spec: ClusterSpec) -> Capabilities:
    """Local nodes are namespaces of this machine, reached over SSH, with no route off it; a
    repaired node comes back at its address."""
    return Capabilities(target="ssh", needs_bootstrap=True, repair_keeps_addresses=True,
                        reaches_google=False, machine_types=False)


def firewall_summary() -> str:
    return ("INPUT drop; allow established, lo, tcp/22 from the controller, "
            "all from cluster nodes")


def _loopback_and_replies() -> list[list[str]]:
    """What every namespace accepts before its own rules: itself, and answers to its requests."""
    return [["-i", "lo", "-j", "ACCEPT"],
            ["-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT"]]


def node_rules(addr: Addresses, node_ips: list[str], ssh_sources: list[str]) -> list[list[str]]:
    rules = _loopback_and_replies()
    rules += [["-p", "tcp", "-s", src, "--dport", "22", "-j", "ACCEPT"] for src in ssh_sources]
    rules += [["-s", f"{ip}/32", "-j", "ACCEPT"] for ip in node_ips]
    return rules


def bucket_rules(addr: Addresses, node_ips: list[str]) -> list[list[str]]:
    rules = _loopback_and_replies()
    for ip in [addr.controller, *node_ips]:
        rules.append(["-p", "tcp", "-s", f"{ip}/32", "--dport", str(EMULATOR_PORT), "-j", "ACCEPT"])
    # The metadata server: its GCE address for the nodes, its controller side for trainctl only.
    for ip in node_ips:
        rules.append(["-p", "tcp", "-s", f"{ip}/32", "-d", f"{metadata.METADATA_IP}/32",
                      "--dport", "80", "-j", "ACCEPT"])
    rules.append(["-p", "tcp", "-s", f"{addr.controller}/32", "-d", f"{addr.bucket}/32",
                  "--dport", str(metadata.ADMIN_PORT), "-j", "ACCEPT"])
    return rules


def registry_rules(addr: Addresses, node_ips: list[str]) -> list[list[str]]:
    rules = _loopback_and_replies()
    rules += [["-p", "tcp", "-s", f"{ip}/32", "--dport", str(registry.REGISTRY_PORT), "-j", "ACCEPT"]
              for ip in [addr.controller, *node_ips]]
    return rules


# ---------------------------------------------------------------------------------------------
# up


def up(spec: ClusterSpec, progress: Callable[[str], None] = lambda _: None) -> Inventory:
    """Create the stack. Refuses an existing one; on failure removes what it created."""
    require_root()
    if spec.provider != "local":
        raise ConfigError(f"stack {spec.name!r} has provider {spec.provider!r}, not local")
    with stack_lock(spec.name, "up") as remove_lock:
        existing = load_state(spec.name)
        if existing is not None:
            raise ConfigError(
                f"stack {spec.name!r} already exists (state {existing.path}); "
                f"use it, or remove it first with `trainctl down --stack {spec.name}`")
        state = new_state(spec.name, spec.model_dump(mode="json"))
        try:
            inventory = _create(spec, state, progress)
        except BaseException:
            progress("creation failed: removing what was created")
            _destroy(state, Names(spec.name), progress)
            remove_lock()
            raise
        state.data["status"] = "ready"
        state.save()
        return inventory


def _create(spec: ClusterSpec, state: StackState, progress: Callable[[str], None]) -> Inventory:
    names = Names(spec.name)
    sdir = state.path.parent
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)

    # Keys first: nothing on the network exists yet, and the inventory pins them from the start.
    client_key = sdir / "keys" / "id_ed25519"
    client_pub = keys.write_ed25519_keypair(client_key, f"trainctl@{spec.name}")
    authorized = sdir / "keys" / "authorized_keys"
    authorized.write_text(client_pub + "\n")
    os.chmod(authorized, 0o600)

    with global_lock():
        subnet = pick_subnet(spec.name)
        addr = Addresses(subnet)
        state.data["subnet"] = str(subnet)
        record = state.intend("bridge", name=names.bridge)
        if netns.link_exists(names.bridge):
            raise LocalStackError(f"interface {names.bridge} already exists: another stack's "
                                  f"name hashes alike; choose another stack name")
        netns.create_bridge(names.bridge, addr.cidr(addr.controller))
        state.created(record)
    progress(f"bridge {names.bridge} {subnet}")

    rule = netns.host_forward_rule(names.bridge)
    record = state.intend("host_rule", rule=rule)
    netns.add_host_rule(rule)
    state.created(record)

    node_ips = [addr.node(i) for i in range(spec.node_count)]

    # The bucket: an emulator in its own namespace, reachable only from the cluster.
    record = state.intend("netns", name=names.bucket_netns, veth=names.bucket_veth)
    netns.create_node_netns(names.bucket_netns, names.bucket_veth, names.bridge,
                            addr.cidr(addr.bucket))
    state.created(record)
    netns.apply_iptables(names.bucket_netns, bucket_rules(addr, node_ips))
    _start_emulator(names, addr, sdir)
    _start_metadata_server(spec, names, addr, sdir)
    stack_registry = _start_registry(state, names, addr, sdir, node_ips) if registry.available() else None

    nodes_dir = sdir / "nodes"

    def create_node(i: int) -> None:
        _start_node(names, addr, sdir, i, node_ips)

    # Intent for every node is on disk before any of them is created.
    records = [state.intend("netns", name=names.node_netns(i), veth=names.veth(i))
               for i in range(spec.node_count)]
    # `ip netns exec` bind-mounts /etc/netns/<ns>/hosts over /etc/hosts: nodes resolve each
    # other by name (as GCE's internal DNS does) and reverse lookups of peers succeed.
    hosts = hosts_file(names, addr, spec.node_count)
    for i in range(spec.node_count):
        etc = Path("/etc/netns") / names.node_netns(i)
        state.intend("dir", name=str(etc))
        etc.mkdir(parents=True, exist_ok=True)
        (etc / "hosts").write_text(hosts)
    with ThreadPoolExecutor(max_workers=min(16, spec.node_count)) as pool:
        list(pool.map(create_node, range(spec.node_count)))
    for r in records:
        state.created(r)

    waits = [(f"node {i}", addr.node(i), 22) for i in range(spec.node_count)]
    waits.append(("bucket emulator", addr.bucket, EMULATOR_PORT))
    if stack_registry:
        waits.append(("registry", addr.registry, registry.REGISTRY_PORT))
    with ThreadPoolExecutor(max_workers=len(waits)) as pool:
        answered = list(pool.map(lambda w: sshd.wait_for_port(w[1], w[2], 20.0), waits))
    late = [w[0] for w, ok in zip(waits, answered) if not ok]
    if late:
        raise LocalStackError(f"not answering after 20 s: {', '.join(late)} "
                              f"(logs under {nodes_dir})")
    progress(f"{spec.node_count} node(s) answering on :22, bucket gs://{names.bucket}")
    host_keys = _published_host_keys(addr, [names.node(i) for i in range(spec.node_count)], progress)

    inventory = Inventory(
        stack=spec.name,
        provider="local",
        nodes=tuple(
            Node(name=names.node(i), rank=i, internal_ip=addr.node(i), ssh_host=addr.node(i),
                 ssh_user="root", host_keys=tuple(host_keys[names.node(i)]), accelerator="cpu",
                 workdir=str(nodes_dir / names.node(i) / "work"), interface=NODE_IFNAME, task=task)
            for i, (task, _) in enumerate(spec.node_tasks)),
        bucket_uri=f"gs://{names.bucket}",
        storage_emulator_host=f"http://{addr.bucket}:{EMULATOR_PORT}",
        ssh_private_key=str(client_key),
        known_hosts=str(sdir / "keys" / "known_hosts"),
        rendezvous_port=RENDEZVOUS_PORT,
        node_env=_node_env(addr, cache),
        offline_nodes=True,
        registry=stack_registry,
    )
    Path(inventory.known_hosts).write_text("\n".join(inventory.known_hosts_lines()) + "\n")
    os.chmod(inventory.known_hosts, 0o600)
    inventory.write(sdir / "inventory.json")
    return inventory


def _start_node(names: Names, addr: Addresses, sdir: Path, i: int, node_ips: list[str]) -> None:
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
        # GCE's metadata address, served from the bucket's namespace (infra/providers/local/metadata.py)
        netns.run(["ip", "route", "add", f"{metadata.METADATA_IP}/32", "via", addr.bucket], netns=ns)
    netns.apply_iptables(ns, node_rules(addr, node_ips, [f"{addr.controller}/32"]))
    sshd.boot_node(ns, names.node(i), ndir / "root", ndir / "tmp", config, ndir / "sshd.log",
                   host_key.with_name(host_key.name + ".pub"))


def _published_host_keys(addr: Addresses, nodes: list[str], progress: Progress) -> dict[str, list[str]]:
    admin = metadata_admin_url(addr)

    def look(missing: list[str]) -> dict[str, list[str]]:
        try:
            return {n: key_lines(metadata_admin.guest_attributes(admin, n, "hostkeys/")["queryValue"]["items"])
                    for n in missing}
        except OSError:  # the metadata server is still starting: look again
            return {}

    return wait_for_host_keys(nodes, look, progress, timeout=HOST_KEY_TIMEOUT, poll=HOST_KEY_POLL_SECONDS)


HOST_KEY_TIMEOUT = 20.0  # published at boot, before sshd starts: there by the time :22 answers
HOST_KEY_POLL_SECONDS = 0.1


def metadata_admin_url(addr: Addresses) -> str:
    return f"http://{addr.bucket}:{metadata.ADMIN_PORT}"


def metadata_admin_for(stack: str) -> str:
    """The controller side of a live stack's metadata server."""
    state = load_state(stack)
    if state is None:
        raise ConfigError(f"stack {stack!r} is not up; run `trainctl up --stack {stack}`")
    return metadata_admin_url(Addresses(ipaddress.IPv4Network(state.data["subnet"])))


def _start_metadata_server(spec: ClusterSpec, names: Names, addr: Addresses, sdir: Path) -> None:
    """Every node's instance metadata, as GCE serves it. Not waited for: the nodes boot while it
    starts (they retry publishing their host keys until it answers), and `up` waits for those."""
    config = sdir / "metadata.json"
    config.write_text(json.dumps({
        "project": {"project-id": f"local-{spec.name}", "numeric-project-id": secrets.randbits(40)},
        "nodes": [metadata_record(spec, names, addr, i) for i in range(spec.node_count)]}, indent=2))
    netns.run(["ip", "addr", "add", f"{metadata.METADATA_IP}/32", "dev", "lo"], netns=names.bucket_netns)
    log = open(sdir / "metadata.log", "ab")
    subprocess.run(
        ["setsid", "-f", "ip", "netns", "exec", names.bucket_netns, sys.executable, "-m", "infra.providers.local.metadata",
         "--config", str(config), "--listen", f"{metadata.METADATA_IP}:80",
         "--admin", f"{addr.bucket}:{metadata.ADMIN_PORT}"],
        check=True, stdin=subprocess.DEVNULL, stdout=log, stderr=log)


def metadata_record(spec: ClusterSpec, names: Names, addr: Addresses, i: int) -> dict[str, Any]:
    """One node as the metadata server describes it; a node created again gets a new id."""
    return {"name": names.node(i), "ip": addr.node(i), "id": secrets.randbits(63), "zone": "local-a",
            "machine-type": "local", "spot": spec.node_is_spot(i),
            "attributes": {"enable-guest-attributes": "TRUE", "trainctl-stack": spec.name}}


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


def _start_registry(state: StackState, names: Names, addr: Addresses, sdir: Path,
                    node_ips: list[str]) -> Registry:
    """The stack's image registry: reachable from the controller and the nodes only, its
    certificate trusted through the stack's cert dir (which local nodes see at the same path)."""
    record = state.intend("netns", name=names.registry_netns, veth=names.registry_veth)
    netns.create_node_netns(names.registry_netns, names.registry_veth, names.bridge,
                            addr.cidr(addr.registry))
    state.created(record)
    netns.apply_iptables(names.registry_netns, registry_rules(addr, node_ips))
    rdir = sdir / "registry"
    registry.seed(rdir / "data", cache_dir() / "registry")
    cert_dir, key = rdir / "certs", rdir / "tls" / "registry.key"
    registry.write_certificate(cert_dir, key, addr.registry, names.stack)
    conf = rdir / "config.yml"
    conf.write_text(registry.config(rdir / "data", f"{addr.registry}:{registry.REGISTRY_PORT}",
                                    cert_dir / "ca.crt", key))
    registry.start(names.registry_netns, conf, rdir / "registry.log")
    return Registry(repository=f"{addr.registry}:{registry.REGISTRY_PORT}/trainctl", cert_dir=str(cert_dir),
                    per_stack=True)


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


# ---------------------------------------------------------------------------------------------
# down


def down(stack: str, *, force: bool = False,
         progress: Callable[[str], None] = lambda _: None) -> bool:
    """Remove everything of the stack. Idempotent; returns whether anything was there."""
    require_root()
    names = Names(stack)
    with stack_lock(stack, "down") as remove_lock:
        try:
            state = load_state(stack)
        except ConfigError:
            if not force:
                raise
            state = None
        if state is None and not force:
            leftovers = discover(names)
            if leftovers:
                raise ConfigError(
                    f"stack {stack!r} has no state, but these exist: {', '.join(leftovers)}; "
                    f"`trainctl down --stack {stack} --force` removes them")
            remove_lock()
            return False
        kill_clients(stack)  # before the nodes go: clients still talking to them would hang on
        if state is None:
            _destroy_discovered(names, progress)
            shutil.rmtree(state_dir(stack), ignore_errors=True)
        else:
            mark_deleting(stack)
            state.data["status"] = "deleting"
            state.save()
            _destroy(state, names, progress)
        remove_lock()
        return True


def discover(names: Names) -> list[str]:
    """Things on this machine that belong to the stack by name, with or without a state file."""
    found = [ns for ns in netns.list_netns() if ns.startswith(names.netns_prefix)]
    found += [str(p) for p in Path("/etc/netns").glob(f"{names.netns_prefix}*")]
    if netns.link_exists(names.bridge):
        found.append(names.bridge)
    if state_dir(names.stack).exists():
        found.append(str(state_dir(names.stack)))
    return found


def _destroy(state: StackState, names: Names, progress: Callable[[str], None]) -> None:
    errors: list[str] = []
    node_records = [r for r in state.resources if r["kind"] == "netns"]

    def remove_ns(record: dict[str, Any]) -> None:
        netns.delete_netns(record["name"])
        netns.delete_link(record["veth"])

    def remove_shared(record: dict[str, Any]) -> None:
        if record["kind"] == "host_rule":
            netns.delete_host_rule(record["rule"])
        elif record["kind"] == "bridge":  # detaches whatever veths are still attached
            netns.delete_link(record["name"])

    # All at once: each is a few `ip`/`iptables` calls that wait on the kernel, none needs another.
    shared = [r for r in state.resources if r["kind"] in ("host_rule", "bridge")]
    with ThreadPoolExecutor(max_workers=16) as pool:
        kept = pool.submit(_capture(lambda _: registry.keep(state.path.parent / "registry" / "data",
                                                           cache_dir() / "registry")), None)
        removed = pool.map(_capture(remove_ns), node_records)
        rules = pool.map(_capture(remove_shared), shared)
        for record, exc in [*zip(node_records, removed), *zip(shared, rules), ({"name": "registry cache"}, kept.result())]:
            if exc:  # keep removing the rest; report at the end
                errors.append(f"{record['name'] if 'name' in record else record['kind']}: {exc}")
    for record in reversed(state.resources):  # their processes are gone with the namespaces
        if record["kind"] == "dir":
            shutil.rmtree(record["name"], ignore_errors=True)
    leftovers = [x for x in discover(names) if not x.startswith(str(state_dir(names.stack)))]
    if leftovers:
        _destroy_discovered(names, progress)
    if errors:
        raise LocalStackError("teardown incomplete: " + "; ".join(errors))
    discard(state.path.parent)  # that it is gone is the caller's to say (`down`, `run`)


def _destroy_discovered(names: Names, progress: Callable[[str], None]) -> None:
    for ns in [n for n in netns.list_netns() if n.startswith(names.netns_prefix)]:
        netns.delete_netns(ns)
    for etc in Path("/etc/netns").glob(f"{names.netns_prefix}*"):
        shutil.rmtree(etc, ignore_errors=True)
    for link in os.listdir("/sys/class/net"):
        if link.startswith(f"tcv{names.digest[:6]}"):
            netns.delete_link(link)
    netns.delete_host_rule(netns.host_forward_rule(names.bridge))
    netns.delete_link(names.bridge)
    progress(f"removed leftovers of stack {names.stack}")


def _capture(fn: Callable[[Any], None]) -> Callable[[Any], Exception | None]:
    def wrapped(arg: Any) -> Exception | None:
        try:
            fn(arg)
            return None
        except Exception as exc:
            return exc
    return wrapped


def inventory(stack: str) -> Inventory:
    path = state_dir(stack) / "inventory.json"
    if not path.exists():
        raise ConfigError(f"stack {stack!r} is not up (no {path}); run `trainctl up --stack {stack}`")
    return Inventory.read(path)


# ---------------------------------------------------------------------------------------------
# the rest of the realizer interface


def estimate(spec: ClusterSpec) -> Estimate:
    return Estimate([("local stack (this machine)", 0.0)])


def spec(stack: str) -> ClusterSpec:
    state = load_state(stack)
    if state is None:
        raise ConfigError(f"stack {stack!r} is not up; run `trainctl up --stack {stack}`")
    return ClusterSpec.model_validate(state.data["spec"])


def info(stack: str) -> StackInfo:
    try:
        state = load_state(stack)
        if state is None:
            raise ConfigError("no state file")
        spec = ClusterSpec.model_validate(state.data["spec"])
        age_h = (time.time() - float(state.data["created_at"])) / 3600
    except (ConfigError, KeyError, TypeError, ValueError):
        return StackInfo(stack, "local", 0, 0.0, 0.0, 0.0, broken=True)
    return StackInfo(stack, "local", spec.node_count, age_h, spec.ttl_hours - age_h, 0.0)


def reap(*, project: str | None, dry_run: bool, progress: Progress) -> list[str]:
    """Local stacks past their TTL; a GCP project sweep is not this realizer's reach."""
    if project is not None:
        return []
    found = []
    for stack in stacks_with_state():
        if recorded_provider(stack) != "local":
            continue
        item = info(stack)
        if item.broken or item.ttl_left_h > 0:
            continue
        found.append(stack)
        progress(f"stack {stack} expired {-item.ttl_left_h:.2f} h ago" + ("" if dry_run else ": removing"))
        if not dry_run:
            down(stack, force=False, progress=progress)
    return found


def simulate(spec: ClusterSpec, project_file: Path | None) -> None:
    from infra.providers.realizers import unsupported

    raise unsupported("local", "--simulate", "the local stack already runs on this machine; "
                                             "--simulate stands a gcp stack up in a simulated project")


def simulate_project(project: str | None) -> bool:
    return False  # the local stack has no project to simulate: `reap --simulate` sweeps it as ever


def stand_in_image(name: str, code_dir: Path, requirements: str | None, excludes: tuple[str, ...]) -> str:
    from infra.providers.realizers import unsupported

    raise unsupported("local", "an image stand-in", "local nodes run the images trainctl builds")


# GCE gives a reclaimed spot VM about 30 s between the ACPI shutdown and the stop.
PREEMPT_GRACE_SECONDS = 30.0


def preempt(stack: str, node: str, *, grace: float = PREEMPT_GRACE_SECONDS,
            progress: Progress = lambda _: None, action: str | None = None,
            unavailable_for: float = 0.0) -> str:
    """Reclaim a spot node as GCE does: its `instance/preempted` turns TRUE, its processes get
    the shutdown's SIGTERM, and after the grace period (or once they are gone) the node is
    stopped (STOP: its disk stays) or deleted (DELETE), as the stack's instance_termination_action
    says. `unavailable_for` seconds the zone then has no spot capacity for it (a stockout):
    repair refuses until then. Returns the action taken."""
    state = load_state(stack)
    if state is None:
        raise ConfigError(f"stack {stack!r} is not up")
    cluster = ClusterSpec.model_validate(state.data["spec"])
    names = Names(stack)
    index = next((i for i in range(cluster.node_count) if names.node(i) == node), None)
    if index is None:
        raise ConfigError(f"stack {stack} has no node {node!r}")
    if not cluster.node_is_spot(index):
        raise ConfigError(f"{node} of stack {stack} is not a spot VM: only spot VMs are preempted "
                          f"(set spot: true)")
    ns = names.node_netns(index)
    if state.data.get("node_status", {}).get(node, "RUNNING") != "RUNNING":
        raise ConfigError(f"node {node} of stack {stack} is not running")
    # `action` overrides the stack's choice (a test preempting once each way)
    action = action or cluster.instance_termination_action or "DELETE"
    if action not in ("STOP", "DELETE"):
        raise ConfigError(f"termination action {action!r}: STOP or DELETE")
    metadata_admin.preempt(metadata_admin_for(stack), node)
    progress(f"{node}: preempted; shutting down (grace {grace:g} s), then {action}")
    netns.terminate_workload(ns)  # ACPI shutdown: every program gets SIGTERM; sshd (PID 1) stays
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(inner != 1 for inner in netns.guest_pids(ns).values()):
        time.sleep(0.1)
    with stack_lock(stack, "preempt"):
        netns.kill_netns_processes(ns)  # the VM stops: the supervisor too, so it never reboots
        if action == "DELETE":
            netns.delete_netns(ns)
            netns.delete_link(names.veth(index))
            discard(state.path.parent / "nodes" / node)
        state = load_state(stack) or state
        state.data.setdefault("node_status", {})[node] = "TERMINATED" if action == "STOP" else "DELETED"
        if unavailable_for > 0:
            state.data.setdefault("capacity_back_at", {})[node] = time.time() + unavailable_for
        state.save()
    progress(f"{node}: {'stopped' if action == 'STOP' else 'deleted'}")
    return action


def instance_status(stack: str, nodes: list[str]) -> dict[str, str | None]:
    """Per node, as Compute's instances.get would say: RUNNING, TERMINATED (stopped), or None
    (no such instance: deleted)."""
    state = load_state(stack)
    recorded = (state.data.get("node_status", {}) if state else {})
    result: dict[str, str | None] = {}
    for node in nodes:
        status = recorded.get(node, "RUNNING") if state else None
        result[node] = None if status == "DELETED" else status
    return result


# A repaired node has its old name and address: the others' commands stay right.


def repair(stack: str, nodes: list[str], progress: Progress) -> Inventory:
    """Bring preempted nodes back under their names and addresses, as a managed instance group
    recreates a spot VM: a stopped node starts again on its disk, a deleted one gets a new disk
    and host key (pinned from its guest attributes, as at `up`). Returns the inventory to go on
    with; nodes still running are left alone."""
    with stack_lock(stack, "repair"):
        state = load_state(stack)
        if state is None:
            raise ConfigError(f"stack {stack!r} is not up")
        cluster = ClusterSpec.model_validate(state.data["spec"])
        names = Names(stack)
        addr = Addresses(ipaddress.IPv4Network(state.data["subnet"]))
        by_name = {names.node(i): i for i in range(cluster.node_count)}
        unknown = [n for n in nodes if n not in by_name]
        if unknown:
            raise ConfigError(f"stack {stack} has no node(s) {', '.join(unknown)}")
        status = state.data.setdefault("node_status", {})
        lost = [n for n in nodes if status.get(n, "RUNNING") != "RUNNING"]
        short = {n: at - time.time() for n, at in state.data.get("capacity_back_at", {}).items()
                 if n in lost and at > time.time()}
        if short:
            raise CapacityUnavailable(", ".join(f"{n}: no spot capacity in the zone for another {s:.0f} s"
                                                for n, s in sorted(short.items())))
        admin = metadata_admin_url(addr)
        node_ips = [addr.node(i) for i in range(cluster.node_count)]
        for node in lost:
            record = metadata_record(cluster, names, addr, by_name[node])
            if status[node] == "TERMINATED":  # the same instance, started again
                record["id"] = metadata_admin.instance(admin, node)["id"]
            metadata_admin.boot(admin, record)
            progress(f"{node}: {'starting again' if status[node] == 'TERMINATED' else 'recreating'}")
            _start_node(names, addr, state.path.parent, by_name[node], node_ips)
        for node in lost:
            if not sshd.wait_for_port(addr.node(by_name[node]), 22, 20.0):
                raise LocalStackError(f"{node} not answering on :22 20 s after its repair")
        keys_ = _published_host_keys(addr, lost, progress)
        current = inventory(stack)
        updated = current.model_copy(update={"nodes": tuple(
            n.model_copy(update={"host_keys": tuple(keys_[n.name])}) if n.name in keys_ else n
            for n in current.nodes)})
        Path(updated.known_hosts).write_text("\n".join(updated.known_hosts_lines()) + "\n")
        updated.write(state.path.parent / "inventory.json")
        for node in lost:
            status[node] = "RUNNING"
        state.save()
        return updated
