"""uv for nodes without a route off the machine (local nodes, a simulated GCP stack's, and image
builds, which share the cache): one cache the controller fills, from which every environment
installs offline, hardlinked, so N environments cost one copy of torch."""

from __future__ import annotations

import os
from pathlib import Path

# Wheels this machine holds for packages no index here has (the local stack's nodes find them too).
LOCAL_WHEELHOUSE = "/opt/wheels"


def offline_uv_env(cache: Path) -> dict[str, str]:
    """uv's settings for installing without a route off the machine (local nodes, and image
    builds, which share the cache)."""
    env = {
        # One cache for all nodes on this machine, on the same filesystem as their workdirs:
        # uv hardlinks from it, so N environments cost one copy of torch.
        "UV_CACHE_DIR": str(cache / "uv"),
        "UV_LINK_MODE": "hardlink",
        "UV_PYTHON_DOWNLOADS": "never",
        # Nodes have no route off the machine; bootstrap fills the cache from the controller.
        "UV_OFFLINE": "1",
    }
    if os.path.isdir(LOCAL_WHEELHOUSE):
        env["UV_FIND_LINKS"] = LOCAL_WHEELHOUSE
    return env
