"""Property-based checks: the spec parser never crashes on arbitrary input (it validates or
raises ValueError), and user values that reach remote shells stay single, inert words."""

from __future__ import annotations

import shlex
import subprocess

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bootstrap.ssh import shell_env
from infra.providers.inventory import Inventory, Node
from infra.spec.cluster import ClusterSpec
from trainctl.launchers.spec import LaunchSpec
from trainctl.launchers.ssh.commands import node_command

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDEuYCTEyVZpPfXSnA6n/xaBlH5vTfcOVaZcm3nX571U"
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True),
                    st.text(max_size=30))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=10), inner, max_size=4)),
                      max_leaves=12)
field_names = st.sampled_from(list(ClusterSpec.model_fields) + ["bogus", "gpu.type"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(field_names, values, max_size=8))
def test_spec_parser_validates_or_refuses_never_crashes(fields):
    try:
        spec = ClusterSpec.model_validate({"name": "x", **fields})
    except ValueError:
        return
    assert spec.node_count >= 1 and spec.procs_per_node >= 1


printable = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)


@settings(max_examples=150, deadline=None)
@given(st.lists(printable, min_size=1, max_size=5), printable)
def test_user_arguments_and_env_values_reach_the_program_verbatim(args, value):
    inv = Inventory(stack="s", provider="local", bucket_uri="gs://b", ssh_private_key="/k",
                    known_hosts="/kh", nodes=(Node(name="node0", rank=0, internal_ip="10.0.0.1",
                                                   ssh_host="10.0.0.1", host_keys=(KEY,), workdir="/w"),))
    program = 'printf "%s\\n" "$@"; printf %s "$USER_VALUE" >&2'
    spec = LaunchSpec(run_id="r", framework="tensorflow", command=("/bin/sh", "-c", program, "sh", *args),
                      env={"USER_VALUE": value})
    command = node_command(inv, inv.nodes[0], spec)
    # Run what the node would run, with the workdir and program swapped for harmless stand-ins.
    command = command.replace("mkdir -p /w/.trainctl/runs/r && cd /w/code && ", "")
    command = command.replace("echo $$ > /w/.trainctl/runs/r/launcher.pid; ", "")
    out = subprocess.run(["bash", "-c", command], capture_output=True, timeout=10)  # bytes: no newline translation
    assert out.stdout.decode() == "".join(f"{a}\n" for a in args)
    assert out.stderr.decode() == value


@given(st.dictionaries(st.from_regex(r"[A-Z_][A-Z0-9_]{0,10}", fullmatch=True), printable, max_size=4))
def test_shell_env_is_one_export_of_quoted_values(env):
    line = shell_env(env)
    if env:
        words = shlex.split(line)
        assert words[0] == "export" and words[-1] == ";"
        assert sorted(words[1:-1]) == sorted(f"{k}={v}" for k, v in env.items())
