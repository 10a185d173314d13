"""Fixtures of the provider tests that must exist once per test process."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from gcpsim.pulumi import zygote


@pytest.fixture(scope="session")
def pulumi_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The stand-in `pulumi`'s fork server, one per test process, as the simulator daemon runs
    one: what `write_launcher(bin, server=...)` hands its commands to."""
    path = tmp_path_factory.mktemp("pulumi-server") / zygote.SOCKET_NAME
    server = zygote.start(path)
    yield path
    zygote.stop(server)
