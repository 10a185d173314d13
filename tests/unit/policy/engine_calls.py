"""What the Pulumi engine hands the pack, for tests that drive its policies as the engine does:
the options of a resource that sets none, and the pack's policies by name."""

from __future__ import annotations

from pulumi_policy import Policy, PolicyCustomTimeouts, PolicyResourceOptions

from policy import pack


def engine_options() -> PolicyResourceOptions:
    # What the engine passes when a resource sets no options (it gives no retainOnDelete at all).
    return PolicyResourceOptions(protect=False, ignore_changes=[], delete_before_replace=None, aliases=[],
                                 custom_timeouts=PolicyCustomTimeouts(0, 0, 0), additional_secret_outputs=[],
                                 parent=None)


def engine_policies() -> dict[str, Policy]:
    return {p.name: p for p in pack.policies()}
