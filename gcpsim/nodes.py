"""The real machine backend: every simulated VM or TPU host is a node on this machine.

A VPC network is a bridge in an edge namespace (vpc.py) with the GCE metadata server of its
machines (namespace_nodes/metadata.py, one per network, on 169.254.169.254 inside the edge; the
backend drives it through its admin API on the edge's uplink address). A machine is a
namespace on that bridge whose boot (image.py) mounts its disk and runs the guest agent
(guest.py), which creates the metadata's users, publishes the host keys, runs the startup
script and becomes sshd. Ingress firewall rules are iptables rules in each machine's namespace
(firewall.py). Everything is recorded before it is made (ledger.py); `cleanup_all(home)`
removes all of a home's traces, also after a crash.

What a machine can and cannot do is listed in docs/how-to/simulator.md; in short: it
reaches its network's machines (as the firewall admits), the metadata server and SERVICE_IP,
nothing else; it shares this host's kernel, CPUs and /usr; its accelerators are declared only.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
import urllib.error
from pathlib import Path
from typing import Any, Callable, TypeVar

from gcpsim import external_ranges, firewall, image, vpc
from gcpsim.guest_notices import GuestNotices
from gcpsim.ledger import Ledger
from gcpsim.machines import FirewallRule, Machine
from gcpsim.errors import SimulatorError
from gcpsim.project import ProjectFile
from namespace_nodes import metadata, metadata_admin, netns, sshd

T = TypeVar("T")
ADMIN_WAIT_SECONDS = 15.0


def machine_of(doc: dict[str, Any]) -> Machine:
    fields = {**doc, "tags": tuple(doc.get("tags", ())), "scopes": tuple(doc.get("scopes", ()))}
    return Machine(**fields)


def rule_of(doc: dict[str, Any]) -> FirewallRule:
    allowed = tuple((p, tuple(ports)) for p, ports in doc["allowed"])
    return FirewallRule(**{**doc, "source_ranges": tuple(doc["source_ranges"]),
                           "source_tags": tuple(doc["source_tags"]),
                           "target_tags": tuple(doc["target_tags"]), "allowed": allowed})


def with_admin(fn: Callable[..., T], *args: Any) -> T:
    """Call the metadata server's admin API, waiting while a network's server starts."""
    deadline = time.monotonic() + ADMIN_WAIT_SECONDS
    while True:
        try:
            return fn(*args)
        except urllib.error.HTTPError:
            raise
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class NodeMachines(GuestNotices):
    """MachineBackend whose machines are real nodes (root: namespaces, iptables, sshd)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.names = vpc.Names(home)
        self.ledger = Ledger(home)
        self.hidden = image.hidden_paths(home)

    def alive(self) -> bool:
        """Whether a simulated network or machine exists (the simulator must stay up for it:
        machines reach its endpoint, and only it removes them)."""
        with self.ledger.edit() as data:
            return bool(data["machines"]) or any(n["status"] != "declared" for n in data["networks"].values())

    def external_range(self) -> ipaddress.IPv4Network:
        """This world's claim on the machine's external addresses (external_ranges.py), kept
        in the ledger too, to claim the same range again after a reboot."""
        with self.ledger.edit() as data:
            held = external_ranges.claim(self.home, data.get("external_range"))
            if data.get("external_range") != str(held):
                data["external_range"] = str(held)
                self.ledger.save()
        return held

    # -- networks -------------------------------------------------------------------------

    def _network(self, data: dict[str, Any], network: str) -> dict[str, Any]:
        return data["networks"].setdefault(network, {
            "edge": self.names.edge(network), "uplink": self.names.uplink(network),
            "dir": str(self.ledger.dir / f"net-{self.names.uplink(network)}"),
            "status": "declared", "firewall": [], "caller_ip": None, "subnets": []})

    def _ensure_network(self, data: dict[str, Any], machine: Machine) -> dict[str, Any]:
        net = self._network(data, machine.network)
        if net["status"] == "created" and not netns.netns_exists(net["edge"]):
            net["status"] = "intent"  # gone with a reboot of this host: made again
        if net["status"] != "created":
            with vpc.host_lock():
                vpc.ensure_service()
                if net["status"] == "intent":  # a crash midway: start again from nothing
                    vpc.remove_edge(net["edge"], net["uplink"])
                net["link"] = vpc.free_link().net
                net["status"] = "intent"
                net["subnets"] = []
                self.ledger.save()
                vpc.create_edge(net["edge"], net["uplink"], vpc.Link(net["link"]))
            self._start_metadata_server(net, machine)
            net["status"] = "created"
            self._apply_edge(data, machine.network)
        if machine.subnet_cidr not in net["subnets"]:
            vpc.add_gateway(net["edge"], machine.subnet_cidr)
            net["subnets"].append(machine.subnet_cidr)
        self.ledger.save()
        return net

    def _start_metadata_server(self, net: dict[str, Any], machine: Machine) -> None:
        ndir = Path(net["dir"])
        ndir.mkdir(parents=True, exist_ok=True, mode=0o700)
        # the number a project file gives by default (Machine carries no number)
        number = ProjectFile.model_construct(project=machine.project, number=None).project_number()
        config = ndir / "metadata.json"
        config.write_text(json.dumps({"project": {
            "project-id": machine.project, "numeric-project-id": number,
            "attributes": dict(machine.project_metadata)}, "nodes": []}))
        image.write_in_place(ndir / "hosts", image.hosts_text([]))
        link = vpc.Link(net["link"])
        with open(ndir / "metadata.log", "ab") as log:
            subprocess.run(
                ["setsid", "-f", "ip", "netns", "exec", net["edge"], sys.executable, "-m",
                 "namespace_nodes.metadata", "--config", str(config), "--listen", f"{metadata.METADATA_IP}:80",
                 "--admin", f"{link.edge_ip}:{vpc.ADMIN_PORT}"],
                check=True, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)

    def _apply_edge(self, data: dict[str, Any], network: str) -> None:
        net = data["networks"][network]
        if net["status"] != "created":
            return
        nats = [vpc.Nat(m["machine"]["internal_ip"], m["machine"]["external_ip"])
                for m in self._on(data, network) if m["status"] == "running" and m["machine"]["external_ip"]]
        vpc.apply_edge(net["edge"], vpc.Link(net["link"]), nats, net["caller_ip"])

    def _on(self, data: dict[str, Any], network: str) -> list[dict[str, Any]]:
        return [m for m in data["machines"].values() if m["network"] == network]

    def _write_hosts(self, data: dict[str, Any], network: str) -> None:
        net = data["networks"][network]
        entries = []
        for rec in self._on(data, network):
            m = machine_of(rec["machine"])
            entries.append((m.internal_ip, f"{m.name}.{m.zone}.c.{m.project}.internal {m.name}"))
        image.write_in_place(Path(net["dir"]) / "hosts", image.hosts_text(entries))

    def _apply_firewalls(self, data: dict[str, Any], network: str, only: str | None = None) -> None:
        """The network's rules into its running machines (`only`: that one machine)."""
        net = data["networks"][network]
        rules = [rule_of(r) for r in net["firewall"]]
        running = [r for r in self._on(data, network) if r["status"] == "running"]
        peers = [firewall.Peer(r["machine"]["internal_ip"], tuple(r["machine"]["tags"])) for r in running]
        for rec in running:
            if only is not None and rec["machine"]["key"] != only:
                continue
            admitted = firewall.machine_rules(rules, tuple(rec["machine"]["tags"]), peers)
            netns.apply_iptables(rec["netns"], [*firewall.LOOPBACK_AND_REPLIES, *admitted])
            netns.run(["ip6tables-restore"], netns=rec["netns"], input=firewall.IPV6_CLOSED)

    def _tags_matter(self, data: dict[str, Any], network: str, tags: tuple[str, ...]) -> bool:
        """Whether a machine with `tags` coming or going changes other machines' rules."""
        return any(set(r["source_tags"]) & set(tags) for r in data["networks"][network]["firewall"])

    def apply_firewall(self, network: str, rules: list[FirewallRule], caller_ip: str) -> None:
        with self.ledger.edit() as data:
            net = self._network(data, network)
            net["firewall"] = [dataclasses.asdict(r) for r in rules]
            net["caller_ip"] = caller_ip
            self.ledger.save()
            self._apply_edge(data, network)
            self._apply_firewalls(data, network)

    def remove_network(self, network: str) -> None:
        with self.ledger.edit() as data:
            for rec in self._on(data, network):
                self.delete(rec["machine"]["key"])
            net = data["networks"].get(network)
            if net is None:
                return
            vpc.remove_edge(net["edge"], net["uplink"])
            shutil.rmtree(net["dir"], ignore_errors=True)
            del data["networks"][network]
            self.ledger.save()
        with vpc.host_lock():
            vpc.remove_service_if_unused()

    # -- machines -------------------------------------------------------------------------

    def boot(self, machine: Machine) -> None:
        if not machine.subnet_cidr or not machine.internal_ip:
            raise SimulatorError(f"simulated machine {machine.key} has no subnetwork range or internal "
                                 f"address ({machine.subnet_cidr!r}, {machine.internal_ip!r}): nothing to plug it into")
        with self.ledger.edit() as data:
            net = self._ensure_network(data, machine)
            rec = data["machines"].get(machine.key)
            if rec is None:
                rec = data["machines"][machine.key] = {
                    "netns": self.names.machine(machine.key), "handle": vpc.port_name(machine.key),
                    "network": machine.network, "instance_id": secrets.randbits(63), "status": "intent",
                    "dir": str(self.ledger.dir / f"vm-{vpc.port_name(machine.key)}")}
            elif rec["status"] == "running":  # booted again while up: a reset
                self._power_off(data, rec)
            rec["machine"] = dataclasses.asdict(machine)
            rec["status"] = "booting"
            self.ledger.save()
            disk = image.Disk(Path(rec["dir"]) / "disk")
            image.prepare(disk, machine)
            admin = vpc.Link(net["link"]).admin_url
            with_admin(metadata_admin.boot, admin, self._metadata_record(rec, machine), rec["handle"])
            with_admin(metadata_admin.set_project_attributes, admin, dict(machine.project_metadata))
            self._write_hosts(data, machine.network)
            self._plug(net, rec, machine)
            rec["status"] = "running"
            self._apply_firewalls(data, machine.network,
                                  None if self._tags_matter(data, machine.network, machine.tags) else machine.key)
            self._apply_edge(data, machine.network)
            if machine.external_ip:
                vpc.route_external(machine.external_ip, net["uplink"], vpc.Link(net["link"]))
            hosts = Path(net["dir"]) / "hosts"
            sshd.start_supervised(rec["netns"], machine.name, image.boot_script(machine, disk, hosts, self.hidden),
                                  Path(rec["dir"]) / "console.log")
            self.ledger.save()

    def _metadata_record(self, rec: dict[str, Any], machine: Machine) -> dict[str, Any]:
        return {"name": machine.name, "ip": machine.internal_ip, "id": rec["instance_id"],
                "zone": machine.zone, "machine-type": machine.machine_type or "unknown",
                "spot": machine.spot, "attributes": dict(machine.metadata),
                "external-ip": machine.external_ip, "tags": list(machine.tags),
                "network": machine.network.split("/", 1)[-1],
                "service-account": {"email": machine.service_account, "scopes": list(machine.scopes),
                                    "token": machine.access_token} if machine.access_token else None}

    def _plug(self, net: dict[str, Any], rec: dict[str, Any], machine: Machine) -> None:
        if netns.netns_exists(rec["netns"]):
            vpc.detach_machine(rec["netns"], net["edge"], rec["handle"])  # what a crash left: plug it in afresh
        vpc.attach_machine(rec["netns"], net["edge"], rec["handle"],
                           vpc.with_prefix(machine.internal_ip, machine.subnet_cidr),
                           vpc.gateway(machine.subnet_cidr))

    def _power_off(self, data: dict[str, Any], rec: dict[str, Any]) -> None:
        net = data["networks"].get(rec["network"])
        if net is not None:
            vpc.detach_machine(rec["netns"], net["edge"], rec["handle"])  # the supervisor ends too
        else:
            netns.delete_netns(rec["netns"])
        machine = rec.get("machine")
        rec["status"] = "stopped"
        if machine is None:
            return
        if net is not None and machine["external_ip"]:
            vpc.unroute_external(machine["external_ip"], net["uplink"])
        self._apply_edge(data, rec["network"])
        if self._tags_matter(data, rec["network"], tuple(machine["tags"])):
            self._apply_firewalls(data, rec["network"])

    def stop(self, key: str) -> None:
        with self.ledger.edit() as data:
            rec = data["machines"].get(key)
            if rec is not None and rec["status"] != "stopped":
                self._power_off(data, rec)
                self.ledger.save()

    def delete(self, key: str) -> None:
        with self.ledger.edit() as data:
            rec = data["machines"].get(key)
            if rec is None:
                return
            self._power_off(data, rec)
            net = data["networks"].get(rec["network"])
            if net is not None and net["status"] == "created":
                try:
                    metadata_admin.remove(vpc.Link(net["link"]).admin_url, rec["handle"])
                except OSError:
                    pass  # the server is gone already: nothing there to forget
            shutil.rmtree(rec["dir"], ignore_errors=True)
            del data["machines"][key]
            if net is not None and net["status"] == "created":
                self._write_hosts(data, rec["network"])
            self.ledger.save()

    def guest_attributes(self, key: str, query_path: str) -> list[dict[str, str]]:
        with self.ledger.edit() as data:
            rec = data["machines"].get(key)
            net = data["networks"].get(rec["network"]) if rec else None
        if rec is None or net is None or net["status"] != "created":
            return []
        found = metadata_admin.guest_attributes(vpc.Link(net["link"]).admin_url, rec["handle"], query_path)
        return list(found["queryValue"]["items"])

    def user_id(self, user: str) -> int | None:
        """The uid the guest agent gave `user` on the machines (useradd on each machine's /etc
        overlay); None until a machine has created the user."""
        with self.ledger.edit() as data:
            dirs = [Path(rec["dir"]) for rec in data["machines"].values()]
        for directory in dirs:
            passwd = image.Disk(directory / "disk").upper("/etc/passwd")
            try:
                lines = passwd.read_text().splitlines()
            except OSError:
                continue
            for line in lines:
                fields = line.split(":")
                if len(fields) > 2 and fields[0] == user:
                    return int(fields[2])
        return None

    def set_metadata(self, machine: Machine) -> None:
        with self.ledger.edit() as data:
            rec = data["machines"].get(machine.key)
            if rec is None:
                return
            old_tags = tuple(rec["machine"]["tags"])
            rec["machine"] = dataclasses.asdict(machine)
            self.ledger.save()
            net = data["networks"][rec["network"]]
            if net["status"] == "created":
                admin = vpc.Link(net["link"]).admin_url
                metadata_admin.set_attributes(admin, rec["handle"], dict(machine.metadata))
                metadata_admin.set_project_attributes(admin, dict(machine.project_metadata))
            if old_tags != machine.tags:
                self._apply_firewalls(data, rec["network"])


def leftovers(home: Path) -> list[str]:
    """Everything of this home's machines that still exists on this machine."""
    names = vpc.Names(home)
    found = [f"netns {ns}" for ns in netns.list_netns() if ns.startswith(names.netns_prefix)]
    found += [f"link {link}" for link in os.listdir("/sys/class/net") if link.startswith(names.link_prefix)]
    marker = str(home.resolve())
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                cmdline = Path(f"/proc/{entry.name}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker in cmdline and int(entry.name) not in (os.getpid(), os.getppid()):
                found.append(f"process {entry.name} {cmdline[:120]}")
    ledger = Ledger(home)
    if ledger.dir.exists():
        # the ledger itself is the simulator's state; what it still records, or a machine's
        # disk beside it, is a leftover
        try:
            recorded = json.loads(ledger.path.read_text()) if ledger.path.exists() else {}
        except ValueError:
            recorded = {"unreadable": True}  # a crash's ledger: something may be recorded
        disks = [p.name for p in ledger.dir.iterdir() if p.is_dir()]
        if recorded.get("machines") or recorded.get("networks") or recorded.get("unreadable") or disks:
            found.append(f"dir {ledger.dir}: {sorted(recorded.get('machines', {}))} {disks}")
    elif held := external_ranges.held_by(home):  # the world's ledger is gone, its claim must go too
        found.append(f"external range {held} still claimed by {home}")
    return found


def cleanup_all(home: Path) -> list[str]:
    """Remove every network, machine, namespace, link, rule, process and folder the backend
    made under `home`, from its ledger and then by name; returns what was there."""
    found = leftovers(home)
    backend = NodeMachines(home)
    try:
        with backend.ledger.edit() as data:
            for key in list(data["machines"]):
                backend.delete(key)
            networks = list(data["networks"])
        for network in networks:
            backend.remove_network(network)
    except (ValueError, OSError) as exc:  # an unreadable ledger: the names still tell
        print(f"machine ledger of {home} unusable ({exc}); removing by name", file=sys.stderr)
    names = vpc.Names(home)
    for ns in netns.list_netns():
        if ns.startswith(names.netns_prefix):
            netns.delete_netns(ns)
    for link in os.listdir("/sys/class/net"):
        if link.startswith(names.link_prefix):
            netns.delete_link(link)
    shutil.rmtree(backend.ledger.dir, ignore_errors=True)
    external_ranges.release(home)
    with vpc.host_lock():
        vpc.remove_service_if_unused()
    return found

