"""`trainctl plan` refuses a stack that violates the policy pack, before anything is created: in
process, and from the CLI with exit 2 and the rule's name and page, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from policy.declared import T_FIREWALL
from policy.rules import RULES_BY_NAME

REPO = Path(__file__).resolve().parents[3]


def test_plan_refuses_a_violating_stack_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    import infra.providers.gcp.program.mocks as mocks
    from infra.spec.stack_config import ConfigError, load_stack
    from infra.providers.gcp import realizer as gcp_realizer

    real = mocks.evaluate

    def with_public_ssh(spec, *a: Any, **kw: Any):
        ev = real(spec, *a, **kw)
        ev.resources.append(mocks.Declared(T_FIREWALL, "open-ssh", {
            "name": "open-ssh", "sourceRanges": ["0.0.0.0/0"], "allows": [{"protocol": "tcp", "ports": ["22"]}]}))
        return ev

    monkeypatch.setattr(mocks, "evaluate", with_public_ssh)
    with pytest.raises(ConfigError) as err:
        gcp_realizer.plan(load_stack("gpu-t4x2"))
    assert "[firewall-no-public-ssh] open-ssh" in str(err.value)
    assert RULES_BY_NAME["firewall-no-public-ssh"].url in str(err.value)


SITECUSTOMIZE = '''
# Test hook: the program declares one more resource, a firewall open to the internet on :22.
import infra.providers.gcp.program.mocks as _mocks
_real = _mocks.evaluate
def _evaluate(spec, *a, **kw):
    ev = _real(spec, *a, **kw)
    ev.resources.append(_mocks.Declared("gcp:compute/firewall:Firewall", "open-ssh", {
        "name": "open-ssh", "sourceRanges": ["0.0.0.0/0"], "allows": [{"protocol": "tcp", "ports": ["22"]}]}))
    return ev
_mocks.evaluate = _evaluate
'''


def test_cli_plan_refuses_a_violating_stack_file_with_exit_2(tmp_path: Path) -> None:
    stack_file = tmp_path / "Pulumi.policy-probe.yaml"
    stack_file.write_text((REPO / "stacks" / "Pulumi.gpu-t4x2.yaml").read_text())
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(textwrap.dedent(SITECUSTOMIZE))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hook), str(REPO)])}
    result = subprocess.run([sys.executable, "-m", "trainctl.cli", "plan", "--stack", str(stack_file)],
                            cwd=REPO, env=env, text=True, capture_output=True, timeout=300)
    out = result.stdout + result.stderr
    assert result.returncode == 2, out
    assert "firewall-no-public-ssh" in out and "opens SSH (tcp:22) to 0.0.0.0/0" in out
    assert RULES_BY_NAME["firewall-no-public-ssh"].url in out
    assert "Traceback" not in out and "compute/instance" not in out  # refused before the plan table


def test_cli_plan_refuses_a_bucket_name_gcp_rejects(tmp_path: Path) -> None:
    """A real user error, no hooks: a bucket name Cloud Storage refuses (it may start with
    'goog' nowhere). If spec validation learns bucket names it refuses first; either way exit 2."""
    stack_file = tmp_path / "Pulumi.bucket-probe.yaml"
    text = (REPO / "stacks" / "Pulumi.gpu-t4x2.yaml").read_text()
    stack_file.write_text(text.rstrip("\n") + "\n  trainctl:bucket:\n    name: goog-checkpoints\n")
    result = subprocess.run([sys.executable, "-m", "trainctl.cli", "plan", "--stack", str(stack_file)],
                            cwd=REPO, text=True, capture_output=True, timeout=300)
    out = result.stdout + result.stderr
    assert result.returncode == 2, out
    assert "goog-checkpoints" in out and "Traceback" not in out
