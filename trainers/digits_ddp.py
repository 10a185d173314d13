"""Reference PyTorch DDP trainer: an MLP on scikit-learn's digits (ships with the package).

Runs under torchrun (reads RANK/WORLD_SIZE/LOCAL_RANK, nothing trainctl-specific) or alone.
gloo on CPU, NCCL on GPUs. Rank 0 checkpoints every epoch to the job dir, and also where the
run stops early: on SIGTERM (a spot VM being reclaimed, a stop) or when a peer is lost mid-step.
Every rank resumes from the latest complete checkpoint at the exact batch it names, so a stopped
and resumed job finishes with the same optimizer steps, in the same order, as an undisturbed
one. Final metrics and model land in the job dir.
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import math
import os
import time
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from trainers import checkpoint, hypertune, storage
from trainers.digits_data import default_job_dir, split
from trainers.stop_request import EXIT_CODE, StopRequest


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--job-dir", default=None,
                   help="gs:// or local dir for checkpoints and results "
                        "(default: the parent of $AIP_MODEL_DIR, as Vertex AI sets it)")
    p.add_argument("--data-dir", default=None,
                   help="read the digits from the .npz shards in this folder (e.g. staged by data:)")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=32, help="per process")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fail-at-epoch", type=int, default=None,
                   help="testing aid: exit non-zero at this epoch (on rank --fail-rank)")
    p.add_argument("--fail-rank", type=int, default=0)
    p.add_argument("--fail-code", type=int, default=3, help="exit code of the deliberate failure")
    p.add_argument("--epoch-sleep", type=float, default=0.0, help="testing aid: slow epochs down")
    args = p.parse_args(argv)
    args.job_dir = args.job_dir or default_job_dir()
    return args


def make_data(seed: int, data_dir: str | None = None) -> tuple[TensorDataset, TensorDataset]:
    x_train, y_train, x_test, y_test = split(seed, data_dir)
    return (TensorDataset(torch.from_numpy(x_train), torch.from_numpy(y_train)),
            TensorDataset(torch.from_numpy(x_test), torch.from_numpy(y_test)))


def make_model(hidden: int) -> nn.Module:
    return nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, 10))


def evaluate(model: nn.Module, data: TensorDataset, device: torch.device) -> tuple[float, float]:
    model.eval()
    with torch.no_grad():
        x, y = data.tensors
        logits = model(x.to(device))
        loss = nn.functional.cross_entropy(logits, y.to(device)).item()
        acc = (logits.argmax(1).cpu() == y).float().mean().item()
    model.train()
    return loss, acc


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    stop = StopRequest.install()
    rank = int(os.environ.get("RANK", 0))
    world = int(os.environ.get("WORLD_SIZE", 1))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    use_cuda = torch.cuda.is_available()
    device = torch.device(f"cuda:{local_rank}" if use_cuda else "cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    if world > 1:
        # A short collective timeout: a lost peer fails the step in a minute, not in 30.
        dist.init_process_group("nccl" if use_cuda else "gloo", timeout=timedelta(seconds=60))
    print(f"rank {rank}/{world} on {device}, job dir {args.job_dir}", flush=True)

    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    train, test = make_data(args.seed, args.data_dir)
    if args.data_dir:
        print(f"data: {len(train) + len(test)} samples from {args.data_dir}", flush=True)
    model = make_model(args.hidden).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    ckpt_dir = storage.join(args.job_dir, "checkpoints")

    # Position: `batch` batches of epoch `epoch` done, their summed loss `epoch_loss`.
    start_epoch, start_batch, partial_loss, step, history = 0, 0, 0.0, 0, []
    restoring = time.monotonic()
    state = checkpoint.load_latest(ckpt_dir)
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start_epoch, step, history = state["epoch"], state["step"], state["history"]
        start_batch, partial_loss = state.get("batch", 0), state.get("epoch_loss", 0.0)
        print(f"rank {rank}: resumed from epoch {start_epoch} batch {start_batch} (step {step}); "
              f"{checkpoint.restored_line(time.monotonic() - restoring)}", flush=True)

    ddp = DistributedDataParallel(model) if world > 1 else model
    sampler = DistributedSampler(train, num_replicas=world, rank=rank, shuffle=True, seed=args.seed)
    loader = DataLoader(train, batch_size=args.batch_size, sampler=sampler)
    steps_per_epoch = math.ceil(len(sampler) / args.batch_size)
    started = time.time()

    def save(epoch: int, batch: int, epoch_loss: float) -> None:
        saving = time.monotonic()
        with stop.busy():  # a SIGTERM now lets the write finish
            checkpoint.save(ckpt_dir, step, {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                             "epoch": epoch, "batch": batch, "epoch_loss": epoch_loss,
                                             "step": step, "history": history})
        print(f"rank 0: {checkpoint.saved_line(time.monotonic() - saving)}", flush=True)

    def stop_here(epoch: int, batch: int, epoch_loss: float, why: str) -> None:
        # The optimizer has not stepped since `step`: every rank holds that same state, so rank
        # 0's copy is the job's, at a position the sampler can replay exactly.
        stop.acknowledge()
        if rank == 0:
            save(epoch, batch, epoch_loss)
            print(f"rank 0: stopping at step {step} ({why}); checkpoint saved", flush=True)

    for epoch in range(start_epoch, args.epochs):
        sampler.set_epoch(epoch)  # the same order on a resume: skip what was done
        skip = start_batch if epoch == start_epoch else 0
        total, batches = (partial_loss, skip) if skip else (0.0, 0)
        for x, y in itertools.islice(loader, skip, None):
            if stop.requested:
                stop_here(epoch, batches, total, "SIGTERM")
                stop.leave(EXIT_CODE)
            optimizer.zero_grad(set_to_none=True)
            try:
                loss = nn.functional.cross_entropy(ddp(x.to(device)), y.to(device))
                loss.backward()  # DDP's all-reduce: where a lost peer shows
            except RuntimeError as exc:
                if world > 1:
                    stop_here(epoch, batches, total, f"a peer was lost: {str(exc).splitlines()[0][:120]}")
                raise
            optimizer.step()
            total, batches, step = total + loss.item(), batches + 1, step + 1
        test_loss, test_acc = evaluate(model, test, device)
        history.append({"epoch": epoch + 1, "train_loss": total / max(batches, 1),
                        "test_loss": test_loss, "test_accuracy": test_acc, "step": step})
        if rank == 0:
            print(f"epoch {epoch + 1}/{args.epochs} loss {total / max(batches, 1):.4f} "
                  f"test_acc {test_acc:.4f} step {step}", flush=True)
            hypertune.report("test_accuracy", test_acc, step=epoch + 1, job_dir=args.job_dir)
            save(epoch + 1, 0, 0.0)
        if world > 1:
            dist.barrier()  # nobody runs ahead of the checkpoint it would resume from
        if args.fail_at_epoch == epoch + 1 and rank == args.fail_rank:
            print(f"rank {rank}: failing on purpose at epoch {epoch + 1}", flush=True)
            return args.fail_code
        if args.epoch_sleep:
            stop.pause(args.epoch_sleep)

    test_loss, test_acc = evaluate(model, test, device)
    if rank == 0:
        metrics = {"test_accuracy": test_acc, "test_loss": test_loss, "epochs": args.epochs,
                   "steps": step, "steps_per_epoch": steps_per_epoch, "world_size": world,
                   "train_seconds": time.time() - started, "history": history,
                   "hyperparameters": {"lr": args.lr, "hidden": args.hidden,
                                       "batch_size": args.batch_size}}
        storage.write_bytes(storage.join(args.job_dir, "metrics.json"),
                            json.dumps(metrics, indent=2).encode())
        buf = io.BytesIO()
        torch.save(model.state_dict(), buf)
        storage.write_bytes(storage.join(args.job_dir, "model", "model.pt"), buf.getvalue())
        print(f"final test_accuracy {test_acc:.4f} after {step} steps", flush=True)
    if world > 1:
        # Ranks leave together: a rank that tears its process group down while rank 0 still
        # writes the results can abort at exit (SIGABRT), and torchrun then restarts it into a
        # rendezvous nobody else joins.
        dist.barrier()
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
