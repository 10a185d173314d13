"""SSH to cluster nodes with pinned host keys, for fabric and for OpenSSH-based tools (rsync).

fabric 3 installs paramiko's auto-add host-key policy on every Connection and never loads known_hosts;
here each connection gets RejectPolicy and exactly the node's host keys from the inventory, so
an unknown host and a wrong key are both refused before anything is sent.
"""

from __future__ import annotations

import base64
import shlex
import time
from typing import TYPE_CHECKING, Iterable

from infra.providers.inventory import Inventory, Node

if TYPE_CHECKING:  # fabric and paramiko load on the first connection, not with the module:
    import fabric  # the OpenSSH argv below is all rsync and `--plan` need
    import paramiko

CONNECT_TIMEOUT = 10.0
KEEPALIVE_SECONDS = 5


def host_key_entry(node: Node) -> str:
    return node.ssh_host if node.ssh_port == 22 else f"[{node.ssh_host}]:{node.ssh_port}"


def pin_host_keys(client: paramiko.SSHClient, node: Node) -> None:
    import paramiko

    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    keys = client.get_host_keys()
    for line in node.host_keys:
        key_type, data = line.split()[:2]
        keys.add(host_key_entry(node), key_type,
                 paramiko.PKey.from_type_string(key_type, base64.b64decode(data)))


def connection(inventory: Inventory, node: Node, timeout: float = CONNECT_TIMEOUT) -> fabric.Connection:
    import fabric

    config = fabric.Config(overrides={"load_ssh_configs": False, "run": {"echo": False}})
    conn = fabric.Connection(
        host=node.ssh_host, user=node.ssh_user, port=node.ssh_port, config=config,
        connect_timeout=timeout,
        connect_kwargs={"key_filename": [inventory.ssh_private_key], "look_for_keys": False,
                        "allow_agent": False, "banner_timeout": timeout, "auth_timeout": timeout},
    )
    pin_host_keys(conn.client, node)
    return conn


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: the node may still be booting or the network hiccupped."""
    from paramiko.ssh_exception import (AuthenticationException, BadHostKeyException,
                                        NoValidConnectionsError, SSHException)

    if isinstance(exc, (BadHostKeyException, AuthenticationException)):
        return False
    if isinstance(exc, SSHException) and "not found in known_hosts" in str(exc):
        return False  # RejectPolicy: an unknown key is a refusal, not a hiccup
    return isinstance(exc, (NoValidConnectionsError, SSHException, OSError, EOFError, TimeoutError))


def open_connection(inventory: Inventory, node: Node, *, deadline: float) -> fabric.Connection:
    """Connect with exponential backoff until `deadline` (monotonic); permanent errors raise."""
    from tenacity import RetryError

    from infra.retry import on_transient_errors

    def attempt() -> fabric.Connection:
        conn = connection(inventory, node, timeout=min(CONNECT_TIMEOUT, max(1.0, deadline - time.monotonic())))
        try:
            conn.open()
            assert conn.transport is not None
            conn.transport.set_keepalive(KEEPALIVE_SECONDS)
            return conn
        except BaseException:
            conn.close()
            raise

    try:
        return on_transient_errors(is_transient, deadline=deadline)(attempt)
    except RetryError as exc:
        raise TimeoutError(f"{node.name} ({node.ssh_host}:{node.ssh_port}): SSH not ready before the "
                           f"deadline; last error: {exc.last_attempt.exception()}") from None


def openssh_command(inventory: Inventory, node: Node) -> list[str]:
    """`ssh` argv that verifies the node against the inventory's known_hosts file."""
    return ["ssh", "-i", inventory.ssh_private_key, "-p", str(node.ssh_port),
            "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
            "-o", f"UserKnownHostsFile={inventory.known_hosts}",
            "-o", "GlobalKnownHostsFile=none",
            "-o", "StrictHostKeyChecking=yes",
            "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
            "-o", f"ConnectTimeout={int(CONNECT_TIMEOUT)}",
            "-l", node.ssh_user]


def shell_env(env: dict[str, str]) -> str:
    """`export K=V; …` with every value quoted: user values never become shell syntax."""
    if not env:
        return ""
    for key in env:
        if not key.replace("_", "a").isalnum() or key[0].isdigit():
            raise ValueError(f"environment variable name {key!r} is not a valid shell name")
    return "export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items())) + " ; "


def join(args: Iterable[str]) -> str:
    return " ".join(shlex.quote(a) for a in args)
