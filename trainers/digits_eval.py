"""Reference evaluator for the DDP trainer: an evaluator pool's program (Vertex AI's
workerpool3). It evaluates each checkpoint as it appears in the job dir, writes
`eval/results.json`, and ends once the training has written its metrics and the last checkpoint
has been evaluated. No trainctl import; CLUSTER_SPEC names its role."""

from __future__ import annotations

import argparse
import json
import time

import torch

from trainers import checkpoint, storage
from trainers.digits_ddp import evaluate, make_data, make_model


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--job-dir", required=True)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=600.0,
                   help="give up after this many seconds without a new checkpoint")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    _, test = make_data(args.seed)
    model = make_model(args.hidden)
    ckpt_dir = storage.join(args.job_dir, "checkpoints")
    results: list[dict] = []
    seen: int | None = None
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        done = storage.exists(storage.join(args.job_dir, "metrics.json"))  # before the look below
        state = checkpoint.load_latest(ckpt_dir)
        if state is not None and state["step"] != seen:
            seen, deadline = state["step"], time.monotonic() + args.timeout
            model.load_state_dict(state["model"])
            loss, acc = evaluate(model, test, torch.device("cpu"))
            results.append({"step": state["step"], "epoch": state["epoch"], "test_loss": loss,
                            "test_accuracy": acc})
            print(f"evaluator: step {state['step']} test_acc {acc:.4f}", flush=True)
            storage.write_bytes(storage.join(args.job_dir, "eval", "results.json"),
                                json.dumps(results, indent=2).encode())
        elif done:
            return 0
        time.sleep(1)
    print(f"evaluator: no new checkpoint for {args.timeout:g} s; giving up", flush=True)
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
