"""A `pulumi` CLI for the GCP simulator: the commands the Automation API issues, a deployment
engine that runs the project's Python program under the Pulumi SDK's runtime, and a provider
stand-in that applies each declared pulumi-gcp resource as the REST calls the Terraform google
provider makes, against the endpoints its provider resource names.

No Pulumi CLI can be installed here; this one exists so that trainctl's realizer, which drives
Pulumi through the Automation API, runs unchanged against the simulator (`--simulate` puts the
directory written by `write_launcher` first on PATH). What it models and what it does not is
listed in docs/how-to/simulator.md.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

LAUNCHER = """#!/bin/sh
# trainctl's simulated `pulumi` (gcpsim/pulumi): not the Pulumi CLI.
exec {python} -m gcpsim.pulumi "$@"
"""
# The same command, handed to the simulator's fork server (zygote.py) when one answers.
SERVED_LAUNCHER = """#!/bin/sh
# trainctl's simulated `pulumi` (gcpsim/pulumi): not the Pulumi CLI.
exec {python} -I -S {client} {server} "$@"
"""


def write_launcher(bin_dir: Path, server: Path | None = None) -> Path:
    """An executable `pulumi` in bin_dir that runs this stand-in with this interpreter, through
    the fork server listening on `server` when there is one."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / "pulumi"
    python = shlex.quote(sys.executable)
    if server is None:
        text = LAUNCHER.format(python=python)
    else:
        client = Path(__file__).with_name("zygote_client.py")
        text = SERVED_LAUNCHER.format(python=python, client=shlex.quote(str(client)),
                                      server=shlex.quote(str(server)))
    tmp = path.with_name(f".pulumi.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.chmod(0o755)
    os.replace(tmp, path)  # another process may be running it right now
    return path
