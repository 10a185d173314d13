"""The network pre-flight's verdict on a measured figure: refused below the fraction of the
catalog's expectation (naming figure, transport and threshold), warned about when the experiment
says so, passed above it; NCCL's own words name the transport it picked."""

from __future__ import annotations

import pytest

from infra.errors import ConfigError
from infra.spec import catalog
from trainctl.jobs.experiment_file import load_experiment
from trainctl.jobs.network_check import MARK, NCCL_NET, NetworkFigure, NetworkTooSlow, figure_of, judge


def test_a_figure_below_the_fraction_is_refused_naming_it():
    figure = NetworkFigure(gbps=0.012, expected_gbps=0.5, transport="TCP (gloo)", world=4)
    with pytest.raises(NetworkTooSlow) as refused:
        judge(figure, 0.5, "refuse", print)
    assert ("all-reduce bus bandwidth 0.012 GB/s across 4 nodes over TCP (gloo): 2% of the 0.500 GB/s "
            "expected, below the 50% this run requires") in str(refused.value)


def test_below_the_fraction_only_warns_when_the_experiment_says_so():
    said: list[str] = []
    judge(NetworkFigure(0.012, 0.5, "TCP (gloo)", 4), 0.5, "warn", said.append)
    assert said and said[0].startswith("[trainctl] WARNING network check: all-reduce bus bandwidth 0.012")


def test_a_figure_above_the_fraction_passes_and_is_said():
    said: list[str] = []
    judge(NetworkFigure(0.4, 0.5, "TCP (gloo)", 2), 0.5, "refuse", said.append)
    assert said == ["[trainctl] network check: all-reduce bus bandwidth 0.400 GB/s across 2 nodes over "
                    "TCP (gloo): 80% of the 0.500 GB/s expected"]


def test_nccl_names_the_transport_it_picked():
    lines = ["node0:123:456 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.2<0>",
             "node0:123:456 [0] NCCL INFO Using network Socket"]
    assert {m.group(1) or m.group(2) for line in lines for m in NCCL_NET.finditer(line)} == {"Socket"}


def test_the_catalog_expects_a_figure_of_local_nodes_and_none_it_never_measured():
    assert catalog.expected_busbw_gbps(None) and catalog.expected_busbw_gbps("a3-megagpu-8g") is None


def test_a_network_check_without_torch_on_the_nodes_is_refused_before_anything_exists(tmp_path):
    exp = tmp_path / "tf.yaml"
    exp.write_text("name: tfnet\nrun: {framework: tensorflow, command: python train.py}\nnetwork_check: {}\n")
    with pytest.raises(ConfigError, match="network_check runs its all-reduce with torch"):
        load_experiment(exp)


def test_rank_0_s_figure_is_read_from_a_line_torchrun_s_tail_ended_in_the_next_prefix():
    # node0.log of a CI run: torchrun read the line before its newline was written
    line = '[node0 r0]:' + MARK + '{"gbps": 0.489, "backend": "gloo", "world": 2, "seconds_per_op": 0.0172}[node0 r0]:'
    assert figure_of(line) == {"gbps": 0.489, "backend": "gloo", "world": 2, "seconds_per_op": 0.0172}
