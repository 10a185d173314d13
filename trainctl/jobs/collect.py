"""Copy a run's artifacts from its job dir in the bucket (and `workdir:` ones from the chief) to
runs/<run-id>/, and plot its loss."""

from __future__ import annotations

import functools
import json
import os
import shutil
import threading
import uuid
import warnings
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Callable

from infra.providers.inventory import Inventory
from infra.providers.stack_home import state_dir
from trainctl.jobs.experiment_spec import WORKDIR, from_workdir


def bucket_fs(inventory: Inventory):
    if inventory.storage_emulator_host:
        # Read by gcsfs at import: its gRPC probe stalls ~60 s per call against the emulator.
        os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
        import gcsfs

        return gcsfs.GCSFileSystem(token="anon", endpoint_url=inventory.storage_emulator_host)
    import gcsfs

    return gcsfs.GCSFileSystem()


def collect(inventory: Inventory, job_dir: str, artifacts: tuple[str, ...], dest: Path, *,
            fs: Any = None, draw: bool = True, run_id: str | None = None,
            image: str | None = None) -> list[str]:
    """Fetch each artifact (a file, or a folder when it ends in '/') from the job dir, or with
    `workdir:` from the chief's working directory for `run_id` (launched in `image`, if any);
    returns what was missing.

    Downloads land in the stack's state folder first and move into `dest` only once all of them
    are complete: an interrupted collect leaves no half-written model among the artifacts, and
    `trainctl down` removes the partial download with the stack, even after a kill -9. One
    listing of the job dir finds every artifact; small files come in one concurrent batch of
    reads (gcsfs' `get` costs ~2 ms per file on top, for metadata and local file handling), large
    ones stream to disk. `draw=False` leaves the loss plot to the caller (`draw_loss`), which can
    draw it while the stack comes down."""
    fs = fs or bucket_fs(inventory)
    staging = state_dir(inventory.stack) / "collecting" / uuid.uuid4().hex[:8]
    root = fs._strip_protocol(job_dir).rstrip("/")
    on_chief = [path for path in map(from_workdir, artifacts) if path is not None]
    listed = fs.find(root, detail=True)
    missing: list[str] = []
    wanted: dict[str, Path] = {}  # remote path -> local file in staging
    for artifact in (a for a in artifacts if from_workdir(a) is None):
        found = {p: staging / p[len(root) + 1:] for p in artifact_objects(listed, root, artifact)}
        if not found:
            missing.append(artifact)
        wanted.update(found)
    try:
        if wanted:
            _download(fs, listed, wanted)
        if on_chief:
            if run_id is None:
                raise ValueError("workdir: artifacts need the run id (whose working directory)")
            from trainctl.jobs.chief_files import fetch_from_chief

            missing += [WORKDIR + path for path in fetch_from_chief(inventory, run_id, image, on_chief, staging)]
        _land(staging, dest)
    except BaseException:  # an interrupted or failed download leaves nothing behind
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(_landing(staging, dest), ignore_errors=True)
        raise
    if draw:
        draw_loss(dest)
    return missing


def _landing(staging: Path, dest: Path) -> Path:
    return dest / f".collecting-{staging.name}"


def _land(staging: Path, dest: Path) -> None:
    """Move the complete download into `dest`, each artifact appearing whole: the runs folder
    may be on another filesystem, where a move is a copy, so it is copied beside the artifacts
    first (a hidden folder) and each one then renamed into place."""
    dest.mkdir(parents=True, exist_ok=True)
    if not staging.exists():
        return
    landing = _landing(staging, dest)
    shutil.move(staging, landing)
    for item in os.listdir(landing):
        target = dest / item
        if target.is_dir():
            shutil.rmtree(target)
        os.replace(landing / item, target)
    landing.rmdir()


def artifact_objects(listed: dict[str, Any], root: str, artifact: str) -> list[str]:
    """The objects of the job dir `root` that make up an artifact: a file, or a folder's files
    when it ends in '/'."""
    remote = f"{root}/{artifact.rstrip('/')}"
    if artifact.endswith("/"):
        return [p for p in listed if p.startswith(remote + "/") and not p.endswith("/")]  # not a folder marker
    return [remote] if remote in listed else []


def _download(fs: Any, listed: dict[str, dict], wanted: dict[str, Path]) -> None:
    # Each local folder once: beyond its requests, a collect of a few small files costs
    # little more than its syscalls.
    for folder in {local.parent for local in wanted.values()}:
        folder.mkdir(parents=True, exist_ok=True)
    small = [p for p in wanted if int(listed[p].get("size") or 0) <= SMALL_FILE]
    if small:
        for path, data in fs.cat(small).items():
            wanted[fs._strip_protocol(path)].write_bytes(data)
    large = [p for p in wanted if p not in small]
    if large:
        fs.get(large, [str(wanted[p]) for p in large])


SMALL_FILE = 16 << 20  # read into memory whole; larger artifacts stream to disk


def draw_loss(run_dir: Path) -> bool:
    metrics = run_dir / "metrics.json"
    if not metrics.exists():
        return False
    return draw_safely(plot_loss, json.loads(metrics.read_text()), run_dir / "loss.png")


class Collector:
    """Made when a job starts: gcsfs, its HTTP session to the bucket and matplotlib load in the
    background while the job trains, so that collecting afterwards costs only the downloads."""

    def __init__(self, inventory: Inventory) -> None:
        self.inventory = inventory
        # A daemon thread, not an executor's: Python joins executor threads at exit, and a run
        # interrupted as training began exited only once this look at the (by then deleted)
        # bucket gave up, minutes after its teardown had finished.
        self.fs: Future[Any] = Future()
        threading.Thread(target=self._warm_up, name="collect-warmup", daemon=True).start()

    def _warm_up(self) -> None:
        try:
            self.fs.set_result(self._open())
        except BaseException as exc:  # noqa: BLE001 - collect opens its own then (see collect())
            self.fs.set_exception(exc)

    def _open(self) -> Any:
        fs = bucket_fs(self.inventory)
        fs.ls(self.inventory.bucket_uri)  # the session and its connection, made now
        new_figure()  # matplotlib's import: ~0.5 s of the collect phase otherwise
        return fs

    def collect(self, job_dir: str, artifacts: tuple[str, ...], dest: Path, *, run_id: str | None = None,
                image: str | None = None) -> list[str]:
        try:
            fs = self.fs.result()
        except Exception:  # noqa: BLE001 - warming up is an optimisation: collect cold instead
            fs = None
        return collect(self.inventory, job_dir, artifacts, dest, fs=fs, draw=False, run_id=run_id, image=image)


# Even without pyplot, matplotlib's text layout (the mathtext parser behind log-scale tick
# labels, the font cache) is shared by every figure in the process and is not thread-safe:
# trials collecting at the same moment take turns to draw.
_DRAWING = threading.RLock()


def takes_turns(draw: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(draw)
    def serialized(*args: Any, **kwargs: Any) -> Any:
        with _DRAWING:
            return draw(*args, **kwargs)
    return serialized


def draw_safely(draw: Callable[..., Any], *args: Any) -> bool:
    """A picture is a by-product of a run; failing to draw it warns and never fails the run."""
    out = args[-1]
    try:
        return bool(draw(*args))
    except Exception as exc:  # noqa: BLE001 - any drawing failure is only worth a warning
        warnings.warn(f"could not draw {out}: {type(exc).__name__}: {exc}", stacklevel=2)
        return False


def new_figure(**kwargs: Any):
    """A figure outside pyplot: no process-wide figure registry, no backend switching."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(**kwargs)
    FigureCanvasAgg(fig)
    return fig


def save_figure(fig, out: Path, dpi: int) -> None:
    fig.tight_layout()
    fig.savefig(out, dpi=dpi)


@takes_turns
def plot_loss(metrics: dict, out: Path) -> bool:
    history = metrics.get("history") or []
    if not history:
        return False
    epochs = [h["epoch"] for h in history]
    fig = new_figure(figsize=(6, 4))
    ax = fig.add_subplot()
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
    save_figure(fig, out, dpi=100)
    return True
