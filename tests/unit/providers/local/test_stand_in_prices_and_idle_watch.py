"""A local stack that names the GCE machine type its nodes stand in for is priced as GCP lists
it (budgets and `ls`'s cost can be tried here); one that names none costs nothing. The idle
watch's arithmetic: CPU used between two looks, and the idle time `ls` reads."""

from __future__ import annotations

import json
import time

import pytest

from infra.errors import ConfigError
from infra.providers.local import idle, realizer
from infra.spec import catalog
from infra.spec.stack_config import load_stack


def test_a_local_stack_naming_a_machine_type_is_priced_as_that_machine_on_gcp():
    spec = load_stack("local", overrides={"nodes": 2, "machine_type": "n1-standard-4"})
    cost = realizer.estimate(spec)
    machine = catalog.MACHINES["n1-standard-4"]
    assert cost.lines[0] == ("2 x n1-standard-4 (GCP list price; stood in for here)", round(2 * machine.price, 4))
    assert cost.per_hour > 2 * machine.price  # and their boot disks
    assert realizer.estimate(load_stack("local")).per_hour == 0.0


def test_a_local_pool_without_its_own_machine_type_is_priced_as_the_stacks():
    spec = load_stack("local", overrides={"machine_type": "n1-standard-4", "pools": [
        {"role": "chief", "machine_type": "n1-standard-8"}, {"role": "worker", "count": 2}]})
    lines = dict(realizer.estimate(spec).lines)
    assert lines["chief: 1 x n1-standard-8 (GCP list price; stood in for here)"] == catalog.MACHINES["n1-standard-8"].price
    assert lines["worker: 2 x n1-standard-4 (GCP list price; stood in for here)"] == 2 * catalog.MACHINES["n1-standard-4"].price


def test_an_unknown_machine_type_on_a_local_stack_is_refused_by_name():
    with pytest.raises(ConfigError, match="unknown machine_type 'n1-standard-5'.*valid: "):
        load_stack("local", overrides={"machine_type": "n1-standard-5"})


def test_idle_minutes_on_a_gcp_stack_of_other_than_vms_is_refused_by_kind():
    with pytest.raises(ConfigError, match="idle_minutes is watched on local stacks and GCP VM stacks only.*kind tpu"):
        load_stack("tpu-v5e-8", overrides={"idle_minutes": 30})
    assert load_stack("gpu-t4x2", overrides={"idle_minutes": 30}).idle_minutes == 30


def test_cpu_used_between_two_looks_counts_new_processes_whole_and_gone_ones_not_at_all():
    before = idle.Sample(sessions=0, cpu_seconds={1: 10.0, 2: 5.0})
    after = idle.Sample(sessions=0, cpu_seconds={1: 10.5, 3: 1.5})  # 2 ended, 3 started
    assert idle.cores_used(before, after, seconds=4.0) == pytest.approx(0.5)
    assert idle.cores_used(after, after, seconds=4.0) == 0.0


def test_ls_reads_how_long_the_watch_has_seen_the_stack_idle(tmp_path, monkeypatch):
    monkeypatch.setattr(idle, "state_dir", lambda stack: tmp_path / stack)
    (tmp_path / "s").mkdir()
    assert idle.idle_hours("s") is None  # no watch
    idle.record("s", None)
    assert idle.idle_hours("s") == 0.0  # in use
    (tmp_path / "s" / idle.IDLE_FILE).write_text(json.dumps({"idle_since": time.time() - 1800}))
    assert idle.idle_hours("s") == pytest.approx(0.5, abs=0.01)
