"""The guest agent of a simulated GCE machine: what google-guest-agent and the metadata script
runner do on a GCE Linux image, driven by the instance's metadata from the metadata server.

It runs inside the machine as root (Python's standard library only: it is the image's agent,
not trainctl's code), as the last step of the machine's boot, and then becomes sshd (PID 1):
  1. reads the metadata (`/?recursive=true`), retrying while the network's server starts;
  2. accounts, as GCE's accounts manager does (GoogleCloudPlatform/guest-agent,
     google_guest_agent/non_windows_accounts.go, metadata.go): the users named in `ssh-keys`
     (instance, plus project unless `block-project-ssh-keys`; legacy `sshKeys` blocks project
     keys; expired `google-ssh` keys dropped) are created with `useradd -m -s /bin/bash -p *`,
     put in the image's default groups and `google-sudoers`, whose sudoers drop-in grants
     passwordless sudo; their keys go to ~/.ssh/authorized_keys after a "# Added by Google"
     line, beside keys of their own; users whose keys left the metadata lose those keys and
     the group. With `enable-oslogin` true (the instance's value over the project's) the
     metadata keys are ignored, as on GCE, and this simulator has no OS Login: nobody logs in.
     /etc is the machine's own (an overlay on its disk), so all of this stays on the machine;
     the list of managed users is kept in /etc/trainctl-guest (GCE: /var/lib/google, but /var
     is this host's here);
  3. publishes the host keys as guest attributes `hostkeys/<type>` when
     `enable-guest-attributes` is true;
  4. starts, in the background, the `startup-script` (instance attributes, else project's), run
     as google_metadata_script_runner does: written to a temporary file and run with
     `/bin/bash -c <file>`, its output on the console prefixed "startup-script: ";
  5. starts a watcher that applies account changes (instances.setMetadata) as they come;
  6. execs sshd.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import re
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from datetime import datetime, timezone
from typing import Any

METADATA = "http://169.254.169.254/computeMetadata/v1"
FLAVOR = {"Metadata-Flavor": "Google"}
SSHD = "/usr/sbin/sshd"
SSHD_CONFIG = "/etc/ssh/sshd_config"
SUDOERS_FILE = "/etc/sudoers.d/google_sudoers"
SUDOERS_GROUP = "google-sudoers"
DEFAULT_GROUPS = ("adm", "dip", "docker", "lxd", "plugdev", "video")  # those the image has
USERS_FILE = "/etc/trainctl-guest/google_users"
GOOGLE_COMMENT = "# Added by Google"
BOOT_WAIT_SECONDS = 60.0
WATCH_TIMEOUT_SECONDS = 60
RUNNER = "google_metadata_script_runner"


def log(message: str) -> None:
    print(message, flush=True)


def parse_bool(value: str | None) -> bool | None:
    """Go's strconv.ParseBool, which the agent uses for metadata flags."""
    if value in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if value in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    return None


# -- what the metadata asks for ---------------------------------------------------------------


def oslogin_enabled(md: dict[str, Any]) -> bool:
    enabled = False
    for scope in ("project", "instance"):  # the instance's value wins
        value = parse_bool(md.get(scope, {}).get("attributes", {}).get("enable-oslogin"))
        if value is not None:
            enabled = value
    return enabled


def key_lines(attributes: dict[str, str]) -> tuple[list[str], bool]:
    """(ssh key lines, whether they block project keys) of one attribute set."""
    keys = [k for k in attributes.get("ssh-keys", "").split("\n")]
    blocks = parse_bool(attributes.get("block-project-ssh-keys")) or False
    if attributes.get("sshKeys"):
        keys += attributes["sshKeys"].split("\n")
        blocks = True
    return keys, blocks


def unexpired(keys: list[str], now: datetime) -> list[str]:
    """Keys without an expiry, or whose `google-ssh {"expireOn": ...}` is still ahead."""
    kept = []
    for key in (k.strip(" ") for k in keys):
        if not key:
            continue
        fields = key.split(" ", 3)
        if len(fields) < 3 or fields[2] != "google-ssh":
            kept.append(key)
            continue
        try:
            expire = json.loads(fields[3])["expireOn"]
            if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4}", expire):
                continue  # Go's layout 2006-01-02T15:04:05-0700; anything else counts as expired
            if datetime.strptime(expire, "%Y-%m-%dT%H:%M:%S%z") > now:
                kept.append(key)
        except (IndexError, ValueError, KeyError, TypeError):
            continue
    return kept


def wanted_keys(md: dict[str, Any], now: datetime) -> dict[str, list[str]]:
    """User -> its public keys, from instance (and, unless blocked, project) metadata."""
    keys, blocked = key_lines(md.get("instance", {}).get("attributes", {}))
    if not blocked:
        keys += key_lines(md.get("project", {}).get("attributes", {}))[0]
    users: dict[str, list[str]] = {}
    for line in unexpired(keys, now):
        user, sep, key = line.partition(":")
        if sep and user:
            users.setdefault(user, []).append(key)
    return users


def authorized_keys_text(existing: str, keys: list[str]) -> str:
    """The user's own keys as they were, then each metadata key after GOOGLE_COMMENT."""
    own, skip = [], False
    for line in existing.split("\n"):
        if not line:
            continue
        if skip:
            skip = False
        elif line == GOOGLE_COMMENT:
            skip = True
        else:
            own.append(line)
    return "".join(f"{line}\n" for line in own) + "".join(f"{GOOGLE_COMMENT}\n{k}\n" for k in keys)


# -- doing it ---------------------------------------------------------------------------------


def fetch(wait_etag: str | None = None) -> tuple[dict[str, Any], str]:
    url = f"{METADATA}/?recursive=true&alt=json"
    timeout = 10.0
    if wait_etag is not None:
        url += f"&wait_for_change=true&timeout_sec={WATCH_TIMEOUT_SECONDS}&last_etag={wait_etag}"
        timeout += WATCH_TIMEOUT_SECONDS
    request = urllib.request.Request(url, headers=FLAVOR)
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.load(response), response.headers.get("ETag", "NONE")


def fetch_at_boot() -> tuple[dict[str, Any], str] | None:
    deadline = time.monotonic() + BOOT_WAIT_SECONDS
    delay = 0.05
    while True:
        try:
            return fetch()
        except (OSError, ValueError) as exc:
            if time.monotonic() > deadline:
                log(f"guest agent: metadata server not answering after {BOOT_WAIT_SECONDS:g} s ({exc})")
                return None
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


def command(*args: str) -> bool:
    proc = subprocess.run(args, capture_output=True, text=True)
    if proc.returncode != 0:
        log(f"guest agent: {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.returncode == 0


def ensure_sudoers() -> None:
    try:
        fd = os.open(SUDOERS_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o440)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "w") as fh:
            fh.write(f"%{SUDOERS_GROUP} ALL=(ALL:ALL) NOPASSWD:ALL\n")
    try:
        grp.getgrnam(SUDOERS_GROUP)
    except KeyError:
        command("groupadd", SUDOERS_GROUP)


def existing_groups() -> list[str]:
    found = []
    for name in (*DEFAULT_GROUPS, SUDOERS_GROUP):
        try:
            grp.getgrnam(name)
            found.append(name)
        except KeyError:
            pass
    return found


def write_authorized_keys(user: str, keys: list[str]) -> None:
    entry = pwd.getpwnam(user)
    ssh_dir = os.path.join(entry.pw_dir, ".ssh")
    path = os.path.join(ssh_dir, "authorized_keys")
    if not keys:
        if os.path.exists(path):
            os.remove(path)
        return
    if not os.path.isdir(ssh_dir):
        os.mkdir(ssh_dir, 0o700)
        os.chown(ssh_dir, entry.pw_uid, entry.pw_gid)
    existing = open(path).read() if os.path.exists(path) else ""
    tmp = path + ".google"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(authorized_keys_text(existing, keys))
    os.chown(tmp, entry.pw_uid, entry.pw_gid)
    os.replace(tmp, path)


def managed_users() -> set[str]:
    try:
        return {u for u in open(USERS_FILE).read().split("\n") if u}
    except FileNotFoundError:
        return set()


def apply_accounts(md: dict[str, Any]) -> None:
    if oslogin_enabled(md):
        log("guest agent: OS Login is enabled: ssh-keys metadata is ignored, and this simulated "
            "machine has no OS Login service, so nobody can log in")
        return
    wanted = wanted_keys(md, datetime.now(timezone.utc))
    ensure_sudoers()
    managed = managed_users()
    for user, keys in sorted(wanted.items()):
        try:
            pwd.getpwnam(user)
        except KeyError:
            log(f"guest agent: creating user {user}")
            if not command("useradd", "-m", "-s", "/bin/bash", "-p", "*", "-G",
                           ",".join(existing_groups()), user):
                continue
        else:
            if user not in managed:
                command("gpasswd", "-a", user, SUDOERS_GROUP)
        write_authorized_keys(user, keys)
    for user in sorted(managed - set(wanted)):
        log(f"guest agent: removing the keys and sudo of user {user}")
        try:
            write_authorized_keys(user, [])
        except KeyError:
            continue
        command("gpasswd", "-d", user, SUDOERS_GROUP)
    os.makedirs(os.path.dirname(USERS_FILE), exist_ok=True)
    with open(USERS_FILE, "w") as fh:
        fh.write("".join(f"{u}\n" for u in sorted(wanted)))


def host_key_files() -> list[str]:
    lines = open(SSHD_CONFIG).read().split("\n")
    return [line.split(None, 1)[1] for line in lines if line.startswith("HostKey ")]


def publish_host_keys(md: dict[str, Any]) -> None:
    enabled = None
    for scope in ("project", "instance"):
        value = parse_bool(md.get(scope, {}).get("attributes", {}).get("enable-guest-attributes"))
        enabled = value if value is not None else enabled
    if not enabled:
        return
    for private in host_key_files():
        kind, encoded = open(private + ".pub").read().split()[:2]
        url = f"{METADATA}/instance/guest-attributes/hostkeys/{kind}"
        request = urllib.request.Request(url, data=encoded.encode(), method="PUT", headers=FLAVOR)
        deadline = time.monotonic() + BOOT_WAIT_SECONDS
        while True:  # a key not published leaves the machine unreachable to a pinning client
            try:
                urllib.request.urlopen(request, timeout=10).close()
                break
            except OSError as exc:
                if time.monotonic() > deadline:
                    log(f"guest agent: publishing host key {kind} failed: {exc}")
                    break
                time.sleep(0.5)


def startup_script(md: dict[str, Any]) -> str | None:
    for scope in ("instance", "project"):
        attributes = md.get(scope, {}).get("attributes", {})
        if attributes.get("startup-script-url"):
            log(f"{RUNNER}: startup-script-url is not supported by the simulator (no route off "
                "this machine): use startup-script")
        if attributes.get("startup-script"):
            return str(attributes["startup-script"])
    return None


def run_startup_script(script: str) -> int:
    log(f"{RUNNER}: Starting startup scripts.")
    log(f"{RUNNER}: Found startup-script in metadata.")
    with tempfile.TemporaryDirectory(prefix="metadata-scripts") as tmp:
        path = os.path.join(tmp, "startup-script")
        with open(path, "w") as fh:
            fh.write(script.lstrip(" \n\v\f\t\r"))
        os.chmod(path, 0o755)
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root"}
        proc = subprocess.Popen(["/bin/bash", "-c", path], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, env=env, cwd="/")
        assert proc.stdout is not None
        for line in proc.stdout:
            log(f"{RUNNER}: startup-script: {line.rstrip()}")
        code = proc.wait()
    log(f"{RUNNER}: startup-script exit status {code}" if code == 0 else
        f"{RUNNER}: Script \"startup-script\" failed with error: exit status {code}")
    log(f"{RUNNER}: Finished running startup scripts.")
    return code


def accounts_view(md: dict[str, Any]) -> str:
    """What the accounts depend on: a change here is what the agent acts on."""
    return json.dumps([oslogin_enabled(md), wanted_keys(md, datetime.now(timezone.utc))])


def watch(md: dict[str, Any], etag: str) -> None:
    """Apply account changes as the metadata changes, until the machine stops."""
    seen = accounts_view(md)
    while True:
        try:
            md, etag = fetch(wait_etag=etag)
        except (OSError, ValueError):
            time.sleep(1.0)
            continue
        if accounts_view(md) != seen:
            apply_accounts(md)
            seen = accounts_view(md)


def in_background(fn: Any, *args: Any) -> None:
    if os.fork() == 0:
        try:
            fn(*args)
        finally:
            os._exit(0)


def boot() -> None:
    found = fetch_at_boot()
    if found is not None:
        md, etag = found
        apply_accounts(md)
        publish_host_keys(md)
        script = startup_script(md)
        if script:
            in_background(run_startup_script, script)
        in_background(watch, md, etag)
    sys.stdout.flush()
    os.execv(SSHD, [SSHD, "-D", "-e", "-f", SSHD_CONFIG])


if __name__ == "__main__":
    if sys.argv[0].startswith("/dev/fd/"):  # read through the boot's descriptor: not sshd's
        os.close(int(sys.argv[0].removeprefix("/dev/fd/")))
    boot()
