"""`trainctl init`: make a user's repository a trainctl project that `trainctl` and `pulumi up`
both work from (they find it by walking up from the working directory)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from infra.spec.stack_config import PROJECT_FILE, REPO_ROOT, ConfigError

EXAMPLE_STACKS = ("local", "gpu-t4x2")
PROGRAM_DIR = "trainctl_program"

# Pulumi runs a directory's __main__.py; importing trainctl's program module runs it, so the
# project always gets the installed trainctl's program, never a stale copy.
PROGRAM = '''"""The Pulumi program of this project: trainctl's, from the installed package."""
import infra.providers.gcp.program.__main__  # noqa: F401  (declares the stack's resources on import)
'''

EXPERIMENT = """# An experiment: `trainctl run experiment.yaml` creates a stack, bootstraps it with this
# directory's code, runs the command on every node, collects the artifacts into runs/<run-id>/
# and tears the stack down, whatever happens.
name: my-experiment
stack: local                 # stacks/Pulumi.local.yaml; stacks/Pulumi.gpu-t4x2.yaml for GCP
overrides:
  nodes: 2
code: .                      # synced to every node (.gitignore is honoured)
# requirements: requirements.txt
run:
  framework: torch           # torchrun across the nodes; tensorflow sets TF_CONFIG; jax: jax.distributed
  command: python train.py --job-dir {job_dir}
ttl_hours: 2
artifacts:
  - metrics.json
  - model/
"""


def pulumi_yaml(name: str) -> str:
    return (f"name: {name}\n"
            "description: Distributed training clusters (trainctl)\n"
            "runtime:\n  name: python\n  options:\n    toolchain: pip\n"
            f"    virtualenv: {sys.prefix}  # the environment trainctl is installed in\n"
            f"main: {PROGRAM_DIR}/\n"
            "stackConfigDir: stacks\n")


def project_name(directory: Path) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", directory.resolve().name).strip("-.")
    return name or "trainctl-project"


def init_project(directory: Path) -> list[Path]:
    """Write the project's files; refuse (before writing any) if one exists."""
    files = {
        PROJECT_FILE: pulumi_yaml(project_name(directory)),
        f"{PROGRAM_DIR}/__main__.py": PROGRAM,
        **{f"stacks/Pulumi.{s}.yaml": (REPO_ROOT / "stacks" / f"Pulumi.{s}.yaml").read_text()
           for s in EXAMPLE_STACKS},
        "experiment.yaml": EXPERIMENT,
    }
    existing = [name for name in files if (directory / name).exists()]
    if existing:
        raise ConfigError(f"{directory} already has {', '.join(existing)}: trainctl init writes only "
                          "new files; move them away or edit them by hand")
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return written
