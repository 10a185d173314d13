"""Reference JAX trainer: the digits MLP of the other trainers, data-parallel over every device of
every process (`jax.distributed`), the same code on CPU nodes and on TPU VM slices.

- In a trainctl job (JAX_COORDINATOR_ADDRESS set) it calls `jax.distributed.initialize()` with
  no arguments: trainctl gives it the coordinator, the process count and this process's id
  (trainctl/launchers/jax_env.py). On a TPU VM JAX finds the chips itself; on CPU nodes each
  process is one CPU device and gradients are all-reduced over gloo (JAX's CPU collectives).
- One mesh axis, "data", over all devices: parameters replicated, each global batch split across
  the devices; each process feeds only its own share (make_array_from_process_local_data), and
  XLA inserts the all-reduce the replicated update needs.
- Checkpoints (parameters, momentum, position): process 0 writes them atomically to the job dir
  each epoch (trainers/checkpoint.py, the numpy codec the TensorFlow trainer uses); every process
  resumes from the latest complete one at the batch it names. A SIGTERM on any process makes all
  of them stop at the same step, process 0 saving it, and exit 143, as the other trainers do; so
  a stopped and rerun job trains the same batches in the same order as an undisturbed one.
Final metrics and weights land in the job dir, as the other trainers' do.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from trainers import checkpoint, storage
from trainers.digits_data import default_job_dir, split
from trainers.stop_request import EXIT_CODE

MOMENTUM = 0.9


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--job-dir", default=None)
    p.add_argument("--data-dir", default=None, help="a folder of .npz shards instead of scikit-learn's digits")
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=32, help="per process")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    args.job_dir = args.job_dir or default_job_dir()
    return args


def init_params(key: jax.Array, hidden: int) -> list[jax.Array]:
    """Three dense layers (64 -> hidden -> hidden -> 10), Glorot-uniform weights, zero biases."""
    sizes = [64, hidden, hidden, 10]
    params = []
    for k, (n_in, n_out) in zip(jax.random.split(key, 3), zip(sizes, sizes[1:])):
        limit = (6.0 / (n_in + n_out)) ** 0.5
        params += [jax.random.uniform(k, (n_in, n_out), jnp.float32, -limit, limit), jnp.zeros(n_out, jnp.float32)]
    return params


def logits_of(params, x):
    w1, b1, w2, b2, w3, b3 = params
    h = jax.nn.relu(x @ w1 + b1)
    h = jax.nn.relu(h @ w2 + b2)
    return h @ w3 + b3


def loss_of(params, x, y):
    log_probs = jax.nn.log_softmax(logits_of(params, x))
    return -jnp.mean(jnp.take_along_axis(log_probs, y[:, None], axis=1))


@partial(jax.jit, static_argnames="lr", donate_argnums=(0, 1))
def train_step(params, velocity, x, y, lr: float):
    """SGD with momentum on the global batch's mean loss: the gradient of a replicated parameter
    over a batch sharded across devices is all-reduced by XLA."""
    loss, grads = jax.value_and_grad(loss_of)(params, x, y)
    velocity = [MOMENTUM * v + g for v, g in zip(velocity, grads)]
    params = [p - lr * v for p, v in zip(params, velocity)]
    return params, velocity, loss


def local(arrays) -> list[np.ndarray]:
    """This process's copy of replicated arrays, as numpy."""
    return [np.asarray(a.addressable_data(0)) for a in arrays]


def accuracy(params: list[np.ndarray], x: np.ndarray, y: np.ndarray) -> float:
    w1, b1, w2, b2, w3, b3 = params
    h = np.maximum(np.maximum(x @ w1 + b1, 0) @ w2 + b2, 0)
    return float(np.mean(np.argmax(h @ w3 + b3, axis=1) == y))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    distributed = bool(os.environ.get("JAX_COORDINATOR_ADDRESS"))
    if distributed:
        jax.distributed.initialize()
    pid, procs = jax.process_index(), jax.process_count()
    mesh = Mesh(np.array(jax.devices()), ("data",))
    replicated = NamedSharding(mesh, PartitionSpec())
    batched = NamedSharding(mesh, PartitionSpec("data"))
    me = f"process {pid}/{procs}"
    print(f"{me}: {jax.device_count()} {jax.devices()[0].platform} device(s), job dir {args.job_dir}", flush=True)

    x_train, y_train, x_test, y_test = split(args.seed, args.data_dir)
    global_batch = args.batch_size * procs
    steps_per_epoch = len(x_train) // global_batch
    start = jax.jit(partial(init_params, hidden=args.hidden), out_shardings=replicated)
    params = start(jax.random.key(args.seed))
    velocity = jax.jit(lambda ps: [jnp.zeros_like(p) for p in ps], out_shardings=replicated)(params)

    ckpt_dir = storage.join(args.job_dir, "checkpoints")
    start_epoch, start_batch, partial_loss, step, history = 0, 0, 0.0, 0, []
    restoring = time.monotonic()
    state = checkpoint.load_latest(ckpt_dir, checkpoint.NPZ)
    if state is not None:
        put = jax.jit(lambda ps: ps, out_shardings=replicated)
        params, velocity = put(state["params"]), put(state["velocity"])
        start_epoch, start_batch, partial_loss = state["epoch"], state["batch"], state["epoch_loss"]
        step, history = state["step"], state["history"]
        print(f"{me}: resumed from epoch {start_epoch} batch {start_batch} (step {step}); "
              f"{checkpoint.restored_line(time.monotonic() - restoring)}", flush=True)

    def to_global(rows: np.ndarray) -> tuple[jax.Array, jax.Array]:
        """The global batch `rows` as arrays sharded over the devices, from this process's share."""
        mine = rows[pid * args.batch_size:(pid + 1) * args.batch_size]
        return (jax.make_array_from_process_local_data(batched, x_train[mine], (global_batch, 64)),
                jax.make_array_from_process_local_data(batched, y_train[mine], (global_batch,)))

    def save(epoch: int, batch: int, epoch_loss: float) -> None:
        """Process 0 writes the position: `batch` batches of `epoch` done, their summed loss."""
        if pid != 0:
            return
        saving = time.monotonic()
        checkpoint.save(ckpt_dir, step, {"params": local(params), "velocity": local(velocity), "epoch": epoch,
                                         "batch": batch, "epoch_loss": epoch_loss, "step": step,
                                         "history": history}, checkpoint.NPZ)
        print(f"{me}: {checkpoint.saved_line(time.monotonic() - saving)}", flush=True)

    started = time.time()
    for epoch in range(start_epoch, args.epochs):
        # Every process draws the same order from the epoch's seed and takes its share of each batch.
        order = np.random.default_rng(args.seed + epoch).permutation(len(x_train))
        skip = start_batch if epoch == start_epoch else 0
        total = partial_loss if skip else 0.0
        for b in range(skip, steps_per_epoch):
            x, y = to_global(order[b * global_batch:(b + 1) * global_batch])
            params, velocity, loss = train_step(params, velocity, x, y, lr=args.lr)
            total, step = total + float(loss.addressable_data(0)), step + 1
            # A SIGTERM on any process (a stop, a spot VM's reclaim) reaches JAX's preemption
            # service, which picks a step every process reaches (jax.experimental.multihost_utils
            # reached_preemption_sync_point): there all stop, holding the same weights.
            if distributed and multihost_utils.reached_preemption_sync_point(step):
                save(epoch, b + 1, total)
                print(f"{me}: stopping at step {step} (SIGTERM)", flush=True)
                return EXIT_CODE
        acc = accuracy(local(params), x_test, y_test)
        history.append({"epoch": epoch + 1, "train_loss": total / steps_per_epoch, "test_accuracy": acc, "step": step})
        if pid == 0:
            print(f"epoch {epoch + 1}/{args.epochs} loss {total / steps_per_epoch:.4f} test_acc {acc:.4f} "
                  f"step {step}", flush=True)
        save(epoch + 1, 0, 0.0)

    weights = local(params)
    acc = accuracy(weights, x_test, y_test)
    if pid == 0:
        metrics = {"test_accuracy": acc, "epochs": args.epochs, "steps": step, "steps_per_epoch": steps_per_epoch,
                   "world_size": procs, "devices": jax.device_count(), "strategy": "jax.distributed",
                   "train_seconds": time.time() - started, "history": history}
        storage.write_bytes(storage.join(args.job_dir, "metrics.json"), json.dumps(metrics, indent=2).encode())
        buf = io.BytesIO()
        np.savez(buf, *weights)
        storage.write_bytes(storage.join(args.job_dir, "model", "weights.npz"), buf.getvalue())
        print(f"final test_accuracy {acc:.4f} after {step} steps", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
