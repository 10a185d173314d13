"""trainctl's policy pack: GCP's documented constraints as plain rules (policy.rules) that
`trainctl plan`, the tests and Pulumi's policy engine (`pulumi up --policy-pack policy`) share.

Importing this package must not need the Pulumi engine or pulumi_policy: only __main__.py,
which the engine runs, builds the pulumi_policy.PolicyPack.
"""

from __future__ import annotations

from pathlib import Path

# The directory that holds PulumiPolicy.yaml: what `--policy-pack` and the Automation API's
# `policy_packs=[...]` take. Absolute, so it works whatever the caller's working directory.
PACK_DIR: str = str(Path(__file__).resolve().parent)
