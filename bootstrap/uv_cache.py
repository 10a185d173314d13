"""The uv cache that offline nodes install from, filled once on the controller.

Nodes without a route to PyPI link their environment from a cache the controller fills with one
install (bootstrap.plan.seed_argv); image builds (trainctl/jobs/image.py, the simulated kubelet)
fill theirs the same way. A failed install is reported in uv's own words.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from bootstrap.plan import BootstrapSpec, installs, seed_argv
from infra.errors import RemoteError
from infra.providers.inventory import Inventory


class PrefetchFailed(RemoteError):
    pass


def controller_uv() -> str:
    return shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent)) or "uv"


def fill_uv_cache(node_env: dict[str, str], spec: BootstrapSpec, log_path: Path) -> tuple[int, str]:
    """The requirements into the uv cache `node_env` names, installed once on the controller
    (seed_argv); returns the install's exit code and output, also appended to `log_path`."""
    argv, env, _seed = seed_argv(node_env, spec, controller_uv())
    argv, home = as_cache_owner(argv, Path(node_env["UV_CACHE_DIR"]))
    done = subprocess.run(argv, env={**os.environ, **env, **home}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, errors="replace")
    with open(log_path, "a") as log:
        log.write(done.stdout)
    return done.returncode, done.stdout


def as_cache_owner(argv: list[str], cache: Path) -> tuple[list[str], dict[str, str]]:
    """The install runs as whoever owns the cache's folder (and with its HOME there): nodes
    whose user is not root link packages from a cache of their own uid (the kernel lets a user
    hardlink only files it owns), so the controller fills that cache as that uid. That uid
    keeps CAP_DAC_READ_SEARCH (ambient, so `sh`, `cd` and uv inherit it): the user's code may
    sit where only root may enter (`/root`, a `mktemp -d` folder), and the install only reads it."""
    try:
        owner = cache.parent.stat().st_uid
    except FileNotFoundError:
        return argv, {}
    if owner == os.geteuid() or os.geteuid() != 0:
        return argv, {}
    return (["setpriv", f"--reuid={owner}", f"--regid={owner}", "--clear-groups",
             "--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search", *argv],
            {"HOME": str(cache.parent)})


def installed_names(spec: BootstrapSpec) -> str:
    """What an install installs, for its failure: the requirements file and the packages."""
    return " and ".join(filter(None, [spec.requirements, *spec.packages]))


def install_failure(requirements: str, output: str, log_path: Path) -> str:
    """Why uv could not install the requirements, in its own words (the resolver's `error:` and
    `cause:` lines, or the `×`/`╰─▶` report it draws on a terminal), then where the whole output is."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    start = next((i for i, line in enumerate(lines) if UV_MARKER.match(line) and
                  not line.lower().startswith(("cause:", "hint:", "╰─▶"))), None)
    reason = ""
    for line in lines[start:] if start is not None else lines[-5:]:
        marker = UV_MARKER.match(line)
        text = line[marker.end():] if marker and not line.lower().startswith("hint:") else line
        # a marked line is uv's next statement; an unmarked one continues a line it wrapped
        glue = ": " if marker and reason and not reason.endswith((":", ".")) else " "
        reason = f"{reason}{glue}{text}" if reason else text
    return f"uv could not install {requirements}: {reason or 'no output'} (all of its output: {log_path})"


UV_MARKER = re.compile(r"(error:|cause:|hint:|×|╰─▶)\s*", re.IGNORECASE)


def prefetch(inventory: Inventory, spec: BootstrapSpec, log_dir: Path) -> None:
    """Fill the cache before offline nodes install from it (nothing to do for online nodes)."""
    if not inventory.offline_nodes or not installs(spec):
        return
    log = log_dir / "controller-prefetch.log"
    code, output = fill_uv_cache(inventory.node_env, spec, log)
    if code != 0:
        raise PrefetchFailed(install_failure(installed_names(spec), output, log))
