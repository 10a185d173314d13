"""`down` relays `pulumi destroy`'s lines, less its advice to run `pulumi stack rm`: `down` removes
the stack itself right after, so nothing is left for the user to remove (issue 48)."""

from __future__ import annotations

from infra.providers.gcp.pulumi_workspace import destroy_output

# As Pulumi's CLI ends a destroy (its versions quote the command with ` or '), and as the
# simulator's stand-in does (gcpsim/pulumi/operations.py).
ADVICE = ["The resources in the stack have been deleted, but the history and configuration associated with "
          "the stack are still maintained. ",
          "If you want to remove the stack completely, run `pulumi stack rm gpu-t4x2`.",
          "If you want to remove the stack completely, run 'pulumi stack rm gpu-t4x2'."]


def test_destroys_advice_to_remove_the_stack_is_not_relayed_and_the_rest_is():
    said: list[str] = []
    relay = destroy_output(said.append)
    lines = [" -  gcp:compute:Instance node-0 deleted (31s)", "Resources:", "    - 12 deleted", *ADVICE,
             "Duration: 1m2s"]
    for line in lines:
        relay(line)
    assert said == [" -  gcp:compute:Instance node-0 deleted (31s)", "Resources:", "    - 12 deleted",
                    "Duration: 1m2s"]
