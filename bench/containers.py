"""Containers against the uv environment, in one run on one 2-node local stack:
  launch   bootstrap + a 1-epoch digits DDP job: pulling the image and running in it, against
           syncing the code and making the uv environment (the default), on fresh nodes each
  rebuild  a one-file change built and pushed, against the first build and push of the same
           code (requirements of their own, so nothing is cached but the base image)
Prints each pair and its ratio. Run as root:
  TRAINCTL_HOME=/var/lib/trainctl-bench .venv/bin/python bench/containers.py
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
import time
from pathlib import Path

from bootstrap.plan import BootstrapSpec
from bootstrap.runner import bootstrap
from infra.providers.local import realizer
from infra.spec.stack_config import REPO_ROOT, load_stack
from trainctl.jobs.image import ImageSpec, build, push
from trainctl.launchers.spec import LaunchSpec
from trainctl.launchers.ssh.supervisor import launch

COMMAND = ("python", "-m", "trainers.digits_ddp", "--epochs", "1", "--job-dir", "{job_dir}")


def timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def job(stack: str, bspec: BootstrapSpec, image: str | None, logs: Path) -> float:
    """Up a fresh 2-node stack, then time bootstrap + launch of the job on it."""
    spec = load_stack("local", name=stack, overrides={"nodes": 2})
    inv = realizer.up(spec)
    try:
        def work() -> None:
            bootstrap(inv, bspec.model_copy(update={"image": image}), logs / "bootstrap")
            result = launch(inv, LaunchSpec(run_id=f"{stack}-job", command=COMMAND, image=image),
                            logs / "launch", lambda _: None)
            assert result.ok, result.describe_failures()
        return timed(work)[0]
    finally:
        realizer.down(stack)


def main() -> None:
    tag = secrets.token_hex(2)
    with tempfile.TemporaryDirectory(prefix="bench-ctr-", dir="/var/tmp") as tmp:
        code = Path(tmp) / "code"
        shutil.copytree(REPO_ROOT / "trainers", code / "trainers", ignore=shutil.ignore_patterns("__pycache__"))
        (code / "trainers" / "bench_marker.py").write_text(f"# {tag}\n")  # an image of its own
        with open(code / "trainers" / "requirements.txt", "a") as reqs:
            reqs.write(f"# bench {tag}\n")  # and an environment layer of its own: a first build
        bspec = BootstrapSpec(code_dir=code, requirements="trainers/requirements.txt")
        image_spec = ImageSpec(name=f"bench-{tag}", code=bspec)
        logs = Path(tmp) / "logs"

        # the registry that gets the pushes: a stack of its own, up for the rebuild pair only
        reg_stack = f"bc{tag}r"
        inv = realizer.up(load_stack("local", name=reg_stack, overrides={"nodes": 1}))
        try:
            assert inv.registry is not None, "docker-registry is not installed (scripts/install.sh)"
            first_build, built = timed(lambda: build(image_spec, logs / "build.log"))
            first_push, image = timed(lambda: push(built, inv.registry, logs / "build.log"))
            (code / "trainers" / "bench_marker.py").write_text(f"# {tag} changed\n")
            re_build, rebuilt = timed(lambda: build(image_spec, logs / "build.log"))
            re_push, _ = timed(lambda: push(rebuilt, inv.registry, logs / "build.log"))
        finally:
            realizer.down(reg_stack)
        (code / "trainers" / "bench_marker.py").write_text(f"# {tag}\n")

        uv = job(f"bc{tag}u", bspec, None, logs / "uv")
        # the image as `run` pushes it: to the new stack's registry, then pulled by every node
        spec = load_stack("local", name=f"bc{tag}c", overrides={"nodes": 2})
        cinv = realizer.up(spec)
        try:
            def container_job() -> None:
                ref = push(built, cinv.registry, logs / "build.log")
                bootstrap(cinv, bspec.model_copy(update={"image": ref}), logs / "ctr" / "bootstrap")
                result = launch(cinv, LaunchSpec(run_id=f"bc{tag}c-job", command=COMMAND, image=ref),
                                logs / "ctr" / "launch", lambda _: None)
                assert result.ok, result.describe_failures()
            ctr = timed(container_job)[0]
        finally:
            realizer.down(spec.name)

    first, again = first_build + first_push, re_build + re_push
    print("| what | baseline | trainctl containers | ratio |")
    print("|---|---|---|---|")
    print(f"| push + bootstrap + 1-epoch job, 2 fresh nodes | uv env {uv:.1f} s | image {ctr:.1f} s | {ctr / uv:.2f} |")
    print(f"| one-file change: build + push | first build + push {first:.1f} s "
          f"(build {first_build:.1f}, push {first_push:.1f}) | {again:.2f} s (build {re_build:.2f}, "
          f"push {re_push:.2f}) | {again / first:.3f} |")


if __name__ == "__main__":
    main()
