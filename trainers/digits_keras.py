"""Reference TensorFlow trainer: the digits MLP, with the strategy its environment calls for.

- TPU VM (a TPU device is present): TPUStrategy. A single-host TPU is driven in-process
  (TPU_NAME=local); on a multi-host slice only worker 0 runs this program and the resolver reaches
  the other workers' TF servers by the slice's name in TPU_NAME, as Google's TPU pod recipes do.
- TF_CONFIG set (as AI Platform sets it, and trainctl on GPU/CPU nodes): MultiWorkerMirroredStrategy.
- otherwise: the default strategy (one process).
A custom training loop, not `model.fit`: Keras 3's fit fails under MultiWorkerMirroredStrategy
(keras-team/keras#20585). Checkpoints (weights, optimizer state, position): the chief writes them
atomically to the job dir each epoch and where the run stops early, on SIGTERM (a spot VM being
reclaimed, a stop); every worker resumes from the latest complete one at the exact batch it
names, so a stopped and resumed job trains the same batches in the same order as an undisturbed one.
"""

from __future__ import annotations

import argparse
import glob
import io
import itertools
import json
import os
import time
from typing import NoReturn

import numpy as np
import tensorflow as tf

from trainers import checkpoint, storage
from trainers.digits_data import default_job_dir, split
from trainers.stop_request import StopRequest


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--job-dir", default=None)
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=32, help="per worker")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epoch-sleep", type=float, default=0.0,
                   help="pause after each epoch (tests: a window for a stop or preemption)")
    args = p.parse_args(argv)
    args.job_dir = args.job_dir or default_job_dir()
    return args


def pick_strategy() -> tuple[tf.distribute.Strategy, str]:
    if glob.glob("/dev/accel*") or glob.glob("/dev/vfio/[0-9]*"):
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
            tpu=os.environ.get("TPU_NAME", "local"))
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver), "tpu"
    if os.environ.get("TF_CONFIG"):
        return tf.distribute.MultiWorkerMirroredStrategy(), "multi-worker"
    return tf.distribute.get_strategy(), "single"


def task() -> tuple[str, int]:
    config = json.loads(os.environ.get("TF_CONFIG", "{}"))
    t = config.get("task", {})
    return t.get("type", "chief"), int(t.get("index", 0))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    strategy, kind = pick_strategy()
    # After the strategy: MultiWorkerMirroredStrategy's coordination service installs its own
    # SIGTERM handler (TSL's preemption notifier), which would otherwise replace this one.
    # No acknowledgement deadline: a worker's stop is a vote in its next step, which ends only
    # when every peer reaches it, after the chief's checkpoint and pause, however slow the
    # machine (a 2 s deadline left the chief in that step with a dead peer, exit 1). A peer that
    # is gone fails the step instead: the strategy aborts its collectives with UnavailableError
    # once the coordination service's heartbeats stop (tensorflow/python/distribute/
    # collective_all_reduce_strategy.py: "If coordination service is enabled, use its internal
    # heartbeat to detect peer failures"; "collectives are aborted and the user program should
    # get a tf.errors.UnavailableError").
    stop = StopRequest.install(ack_seconds=None)
    task_type, task_index = task()
    is_chief = task_type == "chief" or (task_type == "worker" and task_index == 0
                                        and "chief" not in os.environ.get("TF_CONFIG", ""))
    me = f"{task_type}:{task_index}"
    workers = strategy.num_replicas_in_sync
    print(f"{me} strategy={kind} replicas={workers} job dir {args.job_dir}", flush=True)

    x_train, y_train, x_test, y_test = split(args.seed)
    global_batch = args.batch_size * workers
    steps_per_epoch = len(x_train) // global_batch

    def epoch_batches(epoch: int, skip: int):
        # Each epoch's order comes from its own seed, so a run resumed in the middle of an epoch
        # sees the same batches in the same order. The batches already trained are skipped on
        # the distributed iterator, where each is one global batch on every worker alike.
        dataset = (tf.data.Dataset.from_tensor_slices((x_train, y_train.astype("int64")))
                   .shuffle(len(x_train), seed=args.seed + epoch, reshuffle_each_iteration=False)
                   .batch(global_batch, drop_remainder=True))
        return itertools.islice(iter(strategy.experimental_distribute_dataset(dataset)), skip, None)

    # Python's, numpy's, TF's and Keras' generators (Keras 3's initializers draw from its own):
    # the same seed gives the same model, so a resumed run ends as an undisturbed one does.
    tf.keras.utils.set_random_seed(args.seed)
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((64,)),
                                     tf.keras.layers.Dense(args.hidden, activation="relu"),
                                     tf.keras.layers.Dense(args.hidden, activation="relu"),
                                     tf.keras.layers.Dense(10)])
        optimizer = tf.keras.optimizers.SGD(learning_rate=args.lr, momentum=0.9)
        optimizer.build(model.trainable_variables)  # its state exists before a resume restores it
        loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction=tf.keras.losses.Reduction.NONE)

    @tf.function
    def train_step(batch, stopping):
        """One synchronous step that also carries each worker's stop vote: a worker that got
        SIGTERM says so in the step's all-reduce, and every worker learns it from the same step,
        so all stop after it, holding the same weights, with nobody left waiting in a collective
        for a peer that has gone."""
        def step(inputs, vote):
            features, labels = inputs
            with tf.GradientTape() as tape:
                per_example = loss_fn(labels, model(features, training=True))
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss, vote
        losses, votes = strategy.run(step, args=(batch, stopping))
        return (strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None),
                strategy.reduce(tf.distribute.ReduceOp.SUM, votes, axis=None))  # > 0: someone stops

    ckpt_dir = storage.join(args.job_dir, "checkpoints")
    # Position: `batch` batches of epoch `epoch` done, their summed loss `epoch_loss`.
    start_epoch, start_batch, partial_loss, step, history = 0, 0, 0.0, 0, []
    restoring = time.monotonic()
    state = checkpoint.load_latest(ckpt_dir, checkpoint.NPZ)
    if state is not None:
        model.set_weights(state["weights"])
        for variable, value in zip(optimizer.variables, state["optimizer"]):
            variable.assign(value)
        start_epoch, start_batch, partial_loss = state["epoch"], state["batch"], state["epoch_loss"]
        step, history = state["step"], state["history"]
        print(f"{me}: resumed from epoch {start_epoch} batch {start_batch} (step {step}); "
              f"{checkpoint.restored_line(time.monotonic() - restoring)}", flush=True)

    def save(epoch: int, batch: int, epoch_loss: float) -> None:
        saving = time.monotonic()
        with stop.busy():  # a SIGTERM now lets the write finish
            checkpoint.save(ckpt_dir, step, {
                "weights": model.get_weights(), "optimizer": [v.numpy() for v in optimizer.variables],
                "epoch": epoch, "batch": batch, "epoch_loss": epoch_loss, "step": step,
                "history": history}, checkpoint.NPZ)
        print(f"{me}: {checkpoint.saved_line(time.monotonic() - saving)}", flush=True)

    def peer_gone_while_stopping(epoch: int, batch: int, epoch_loss: float) -> NoReturn:
        """A stop was requested here and a peer left before the step that carries the vote
        ended: this worker stops as requested. The chief saves the position only where the
        weights are still those of the last step it counted (the failed step applied nothing)."""
        stop.acknowledge()
        if is_chief and int(optimizer.iterations.numpy()) == step:
            save(epoch, batch, epoch_loss)
            print(f"{me}: stopping at step {step} (SIGTERM, a peer gone); checkpoint saved", flush=True)
        stop.leave()

    def leave_together() -> None:
        """Every worker waits at a barrier of the coordination service before any leaves the
        step that carried the stop vote: a collective's result is complete on one worker while
        a peer may still be fetching that worker's part of it (TF's collectives pull buffers
        from their peers), so a worker that left at once failed its peer's last all-reduce
        ("Socket closed"). The barrier is the coordination service's own
        (tensorflow/python/eager/context.py `wait_at_barrier`: "Blocks until all coordinated
        tasks are at the barrier"); a peer that is gone fails it, and then there is no one
        left to wait for."""
        if kind != "multi-worker":
            return
        from tensorflow.python.eager import context

        try:
            context.context().wait_at_barrier(f"trainctl-stop-at-step-{step}", 600_000)
        except tf.errors.OpError as exc:
            print(f"{me}: not every peer reached the stop ({type(exc).__name__}); leaving", flush=True)

    started = time.time()
    for epoch in range(start_epoch, args.epochs):
        skip = start_batch if epoch == start_epoch else 0
        total, batches = (partial_loss, skip) if skip else (0.0, 0)
        for batch in epoch_batches(epoch, skip):
            try:
                loss, stopping = train_step(batch, tf.constant(1.0 if stop.requested else 0.0))
            except tf.errors.UnavailableError:
                if not stop.requested:
                    raise  # a peer failed: the job failed
                peer_gone_while_stopping(epoch, batches, total)
            total, batches, step = total + float(loss), batches + 1, step + 1
            if float(stopping):
                stop.acknowledge()
                leave_together()
                if is_chief:
                    save(epoch, batches, total)
                    why = "SIGTERM" if stop.requested else "a peer's SIGTERM"
                    print(f"{me}: stopping at step {step} ({why}); checkpoint saved", flush=True)
                stop.leave()
        logits = model(x_test, training=False)
        acc = float(np.mean(np.argmax(logits, axis=1) == y_test))
        history.append({"epoch": epoch + 1, "train_loss": total / steps_per_epoch, "test_accuracy": acc,
                        "step": step})
        if is_chief:
            print(f"epoch {epoch + 1}/{args.epochs} loss {total / steps_per_epoch:.4f} test_acc {acc:.4f} "
                  f"step {step}", flush=True)
            save(epoch + 1, 0, 0.0)
        if args.epoch_sleep:
            stop.pause(args.epoch_sleep)

    logits = model(x_test, training=False)
    acc = float(np.mean(np.argmax(logits, axis=1) == y_test))
    if is_chief:
        metrics = {"test_accuracy": acc, "epochs": args.epochs, "steps": step,
                   "steps_per_epoch": steps_per_epoch, "world_size": workers, "strategy": kind,
                   "train_seconds": time.time() - started, "history": history}
        storage.write_bytes(storage.join(args.job_dir, "metrics.json"), json.dumps(metrics, indent=2).encode())
        buf = io.BytesIO()
        np.savez(buf, *model.get_weights())
        storage.write_bytes(storage.join(args.job_dir, "model", "weights.npz"), buf.getvalue())
        print(f"final test_accuracy {acc:.4f} after {step} steps", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
