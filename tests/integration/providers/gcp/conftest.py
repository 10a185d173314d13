"""Fixtures of the simulated-project tests of the GCP realizer."""

from __future__ import annotations

from typing import Iterator

import pytest


@pytest.fixture(autouse=True)
def simulator_kept_after_down(request: pytest.FixtureRequest) -> Iterator[None]:
    """A `down` gives the simulator back (private_endpoints.release: it stops once idle, its
    pulumi fork server with it) and the next command starts both again: about 2.5 s and a fresh
    pulumi-gcp preload for every `down` of every test here, although the session's daemon serves
    the next test at once. These tests prove what a stack does, not that release: the downs of
    tests/integration/providers/test_gcp_stack_lifecycle.py (outside this folder) still run it, and its
    test_after_a_down_released_the_simulator_the_same_process_reaches_it_again proves the next
    verb reaching it again; tests/integration/providers/simulator/test_sim_daemon.py, a restart
    keeping its world. Here the endpoints in use name no release command, so the daemon stays up
    between commands."""
    if "simulated_gcp" not in request.fixturenames:
        yield
        return
    request.getfixturevalue("simulated_gcp")  # start_project has pointed this process at it
    from infra.providers.gcp import private_endpoints

    used = private_endpoints.in_use()
    assert used is not None and used.release, "the simulated project's endpoints name their release"
    private_endpoints.use(used.model_copy(update={"release": []}))
    try:
        yield
    finally:
        private_endpoints.use(used)
