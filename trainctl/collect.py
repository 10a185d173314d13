"""Copy a run's artifacts from its job dir in the bucket to runs/<run-id>/, and plot its loss."""

from __future__ import annotations

import json
import os
from pathlib import Path

from infra.inventory import Inventory


def bucket_fs(inventory: Inventory):
    if inventory.storage_emulator_host:
        # Read by gcsfs at import: its gRPC probe stalls ~60 s per call against the emulator.
        os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
        import gcsfs

        return gcsfs.GCSFileSystem(token="anon", endpoint_url=inventory.storage_emulator_host)
    import gcsfs

    return gcsfs.GCSFileSystem()


def collect(inventory: Inventory, job_dir: str, artifacts: tuple[str, ...], dest: Path) -> list[str]:
    """Fetch each artifact (a file, or a folder when it ends in '/'); returns what was missing."""
    fs = bucket_fs(inventory)
    dest.mkdir(parents=True, exist_ok=True)
    missing = []
    for artifact in artifacts:
        remote = f"{job_dir.rstrip('/')}/{artifact.rstrip('/')}"
        local = dest / artifact.rstrip("/")
        if not fs.exists(remote):
            missing.append(artifact)
            continue
        if artifact.endswith("/"):
            local.mkdir(parents=True, exist_ok=True)
            fs.get(remote + "/", str(local) + "/", recursive=True)
        else:
            local.parent.mkdir(parents=True, exist_ok=True)
            fs.get(remote, str(local))
    metrics = dest / "metrics.json"
    if metrics.exists():
        plot_loss(json.loads(metrics.read_text()), dest / "loss.png")
    return missing


def plot_loss(metrics: dict, out: Path) -> bool:
    history = metrics.get("history") or []
    if not history:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epochs = [h["epoch"] for h in history]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(epochs, [h["train_loss"] for h in history], label="train loss")
    if "test_loss" in history[0]:
        ax.plot(epochs, [h["test_loss"] for h in history], label="test loss")
    ax.set_xlabel("epoch")
    ax.set_ylabel("cross-entropy")
    ax.set_yscale("log")
    if "test_accuracy" in history[0]:
        acc = ax.twinx()
        acc.plot(epochs, [h["test_accuracy"] for h in history], color="tab:green",
                 linestyle="--", label="test accuracy")
        acc.set_ylabel("test accuracy")
        acc.set_ylim(0, 1)
    ax.legend(loc="center right")
    ax.set_title(f"world size {metrics.get('world_size', '?')}, "
                 f"final accuracy {metrics.get('test_accuracy', float('nan')):.3f}")
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return True
