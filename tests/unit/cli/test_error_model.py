"""One error hierarchy decides exit codes: each class is printed with its headline, no traceback."""

from __future__ import annotations

import pytest

from bootstrap.node_runner import NodeResult
from bootstrap.runner import BootstrapFailed
from bootstrap.uv_cache import PrefetchFailed
from infra.errors import ConfigError, ProvisionError, TrainctlError
from infra.providers.inventory import Inventory, Node
from namespace_nodes.netns import CommandFailed
from infra.providers.local.layout import LocalStackError
from trainctl.cli import entry as cli
from trainctl.jobs.experiment import RunFailed


def exit_of(exc: BaseException, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    def raising(**_kw: object) -> None:
        raise exc
    monkeypatch.setattr(cli, "app", raising)
    with pytest.raises(SystemExit) as done:
        cli.main()
    captured = capsys.readouterr()
    return int(done.value.code), captured.out + captured.err


@pytest.mark.parametrize("exc, code, headline", [
    (ConfigError("trainctl:nodes: 0 is below 1"), 2, "error: trainctl:nodes: 0 is below 1"),
    (ProvisionError("no host keys published by w0"), 3, "provisioning failed"),
    (LocalStackError("teardown incomplete: bridge tcb1"), 3, "provisioning failed"),
    (BootstrapFailed([NodeResult("node1", failed_step="env", exit_code=1, error="uv failed")]), 1, "bootstrap failed"),
    (PrefetchFailed("uv could not fill the cache"), 1, "failed on the nodes"),
    (RunFailed("node1 exited 1"), 1, "run failed"),
])
def test_each_error_class_has_its_exit_code_and_headline(exc, code, headline, monkeypatch, capsys):
    assert isinstance(exc, TrainctlError)
    got, output = exit_of(exc, monkeypatch, capsys)
    assert got == code
    assert headline in output and str(exc).splitlines()[0] in output
    assert "Traceback" not in output


def test_the_namespace_machinery_s_failure_is_a_provisioning_failure(monkeypatch, capsys):
    got, output = exit_of(CommandFailed("ip link add failed"), monkeypatch, capsys)
    assert got == 3
    assert "provisioning failed" in output and "ip link add failed" in output
    assert "Traceback" not in output


def test_an_unknown_node_is_bad_input_not_an_internal_key_error():
    inventory = Inventory(stack="s", provider="local", bucket_uri="gs://b", ssh_private_key="k", known_hosts="h",
                          nodes=(Node(name="n0", rank=0, internal_ip="10.0.0.2", ssh_host="10.0.0.2",
                                      host_keys=("ssh-ed25519 AAAA",), workdir="/w"),))
    with pytest.raises(ConfigError, match="no node '7'; nodes: n0"):
        inventory.node("7")


def test_a_bug_keeps_its_traceback(monkeypatch, capsys):
    with pytest.raises(ZeroDivisionError):
        exit_of(ZeroDivisionError("a bug"), monkeypatch, capsys)
