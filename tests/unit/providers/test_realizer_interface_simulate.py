"""`--simulate` is a capability every realizer answers: GCP's points the process at a
simulated project, the local stack's says why it has none."""

from __future__ import annotations

import pytest

from infra.providers import realizers
from infra.errors import ConfigError
from infra.spec.stack_config import load_stack


def test_every_realizer_answers_simulate():
    for name in realizers.PROVIDERS:
        assert callable(getattr(realizers.realizer(name), "simulate", None)), name


def test_the_local_stack_refuses_simulate_saying_why():
    spec = load_stack("local")
    with pytest.raises(ConfigError, match="already runs on this machine"):
        realizers.for_spec(spec).simulate(spec, None)
