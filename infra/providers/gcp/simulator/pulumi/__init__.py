"""A `pulumi` CLI for the GCP simulator: the commands the Automation API issues, a deployment
engine that runs the project's Python program under the Pulumi SDK's runtime, and a provider
stand-in that applies each declared pulumi-gcp resource as the REST calls the Terraform google
provider makes, against the endpoints its provider resource names.

No Pulumi CLI can be installed here; this one exists so that trainctl's realizer, which drives
Pulumi through the Automation API, runs unchanged against the simulator (`--simulate` puts the
directory written by `write_launcher` first on PATH). What it models and what it does not is
listed in the README's simulator section.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

LAUNCHER = """#!/bin/sh
# trainctl's simulated `pulumi` (infra/providers/gcp/simulator/pulumi): not the Pulumi CLI.
exec {python} -m infra.providers.gcp.simulator.pulumi "$@"
"""


def write_launcher(bin_dir: Path) -> Path:
    """An executable `pulumi` in bin_dir that runs this stand-in with this interpreter."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / "pulumi"
    path.write_text(LAUNCHER.format(python=shlex.quote(sys.executable)))
    path.chmod(0o755)
    return path
