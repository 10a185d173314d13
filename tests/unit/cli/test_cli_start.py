"""The CLI starts at once because a verb loads only what it uses: `--help` and `ls` with no stack
up never import the models, Pulumi, fabric or rich's tables. (The time itself is measured by
bench/cli_start.py; tests assert what is loaded, not how long it took.)"""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import REPO

HEAVY = ("infra.spec.stack_config", "infra.spec.cluster", "pulumi", "fabric", "paramiko", "rich.table",
         "trainctl.launchers.ssh", "bootstrap.runner", "google")

PROBE = """
import json, sys
sys.argv = ["trainctl", *{argv!r}]
from trainctl.cli.entry import main
try:
    main()
except SystemExit:
    pass
sys.stderr.write("MODULES " + json.dumps(sorted(sys.modules)) + "\\n")
"""


def loaded_by(argv: list[str], home) -> set[str]:
    done = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv)], cwd=REPO, text=True,
                          capture_output=True, env={"TRAINCTL_HOME": str(home), "PATH": "/usr/bin:/bin"})
    assert not any(l.startswith("error") for l in done.stderr.splitlines()), done.stderr
    line = next(l for l in done.stderr.splitlines() if l.startswith("MODULES "))
    return set(json.loads(line.removeprefix("MODULES ")))


def heavy_in(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


def test_help_loads_no_model_cloud_or_ssh_library(trainctl_home):
    assert heavy_in(loaded_by(["--help"], trainctl_home)) == []


def test_ls_with_nothing_up_loads_no_model_cloud_or_ssh_library(trainctl_home):
    modules = loaded_by(["ls"], trainctl_home)
    assert "trainctl.cli" in modules
    assert heavy_in(modules) == []
