"""`--simulate` is a convenience of its own, not a realizer verb: it stands a gcp stack up in a
simulated project, and refuses the local stack saying why. The realizers know nothing of it."""

from __future__ import annotations

import inspect

import pytest

from infra.errors import ConfigError
from infra.providers import realizers, simulated_project
from infra.providers.protocol import Realizer
from infra.spec.stack_config import load_stack


def test_the_local_stack_refuses_simulate_saying_why():
    with pytest.raises(ConfigError, match="already runs on this machine"):
        simulated_project.start(load_stack("local"), None)


def test_no_realizer_and_not_the_protocol_knows_of_simulation():
    for source in (inspect.getsource(Realizer), *(inspect.getsource(realizers.realizer(name))
                                                 for name in realizers.PROVIDERS)):
        assert "simulat" not in source.lower()
