"""Entry point the Pulumi engine runs for `pulumi up --policy-pack policy`: serves the pack."""

import sys
from pathlib import Path

# The engine starts this from the pack directory; the rules import `policy.*` and the repo's
# `infra` catalog, so the repository root must be importable.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pulumi_policy import EnforcementLevel, PolicyPack  # noqa: E402

from policy.pack import PACK_NAME, policies  # noqa: E402

PolicyPack(PACK_NAME, policies(), enforcement_level=EnforcementLevel.MANDATORY,
           description="GCP's documented constraints for trainctl stacks")
