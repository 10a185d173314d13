"""Reference TensorFlow trainer: the digits MLP, with the strategy its environment calls for.

- TPU VM (a TPU device is present): TPUStrategy. A single-host TPU is driven in-process
  (TPU_NAME=local); on a multi-host slice only worker 0 runs this program and the resolver reaches
  the other workers' TF servers by the slice's name in TPU_NAME, as Google's TPU pod recipes do.
- TF_CONFIG set (as AI Platform sets it, and trainctl on GPU/CPU nodes): MultiWorkerMirroredStrategy.
- otherwise: the default strategy (one process).
A custom training loop, not `model.fit`: Keras 3's fit fails under MultiWorkerMirroredStrategy
(keras-team/keras#20585). Checkpoints: the chief writes them atomically to the job dir each
epoch; every worker resumes from the latest complete one.
"""

from __future__ import annotations

import argparse
import glob
import io
import json
import os
import time

import numpy as np
import tensorflow as tf

from trainers import storage
from trainers.digits_data import default_job_dir, split


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--job-dir", default=None)
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=32, help="per worker")
    p.add_argument("--seed", type=int, default=0)
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
    task_type, task_index = task()
    is_chief = task_type == "chief" or (task_type == "worker" and task_index == 0
                                        and "chief" not in os.environ.get("TF_CONFIG", ""))
    workers = strategy.num_replicas_in_sync
    print(f"{task_type}:{task_index} strategy={kind} replicas={workers} job dir {args.job_dir}", flush=True)

    x_train, y_train, x_test, y_test = split(args.seed)
    global_batch = args.batch_size * workers
    dataset = (tf.data.Dataset.from_tensor_slices((x_train, y_train.astype("int64")))
               .shuffle(len(x_train), seed=args.seed, reshuffle_each_iteration=True)
               .batch(global_batch, drop_remainder=True))
    dist_dataset = strategy.experimental_distribute_dataset(dataset)
    steps_per_epoch = len(x_train) // global_batch

    with strategy.scope():
        tf.random.set_seed(args.seed)
        model = tf.keras.Sequential([tf.keras.Input((64,)),
                                     tf.keras.layers.Dense(args.hidden, activation="relu"),
                                     tf.keras.layers.Dense(args.hidden, activation="relu"),
                                     tf.keras.layers.Dense(10)])
        optimizer = tf.keras.optimizers.SGD(learning_rate=args.lr, momentum=0.9)
        loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction=tf.keras.losses.Reduction.NONE)

    @tf.function
    def train_step(batch):
        def step(inputs):
            features, labels = inputs
            with tf.GradientTape() as tape:
                per_example = loss_fn(labels, model(features, training=True))
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        losses = strategy.run(step, args=(batch,))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    ckpt_dir = storage.join(args.job_dir, "checkpoints")
    start_epoch, history = 0, []
    latest = _load_latest(ckpt_dir)
    if latest is not None:
        weights, start_epoch, history = latest
        model.set_weights(weights)
        print(f"{task_type}:{task_index}: resumed from epoch {start_epoch}", flush=True)

    started = time.time()
    for epoch in range(start_epoch, args.epochs):
        total = 0.0
        for batch in dist_dataset:
            total += float(train_step(batch))
        logits = model(x_test, training=False)
        acc = float(np.mean(np.argmax(logits, axis=1) == y_test))
        history.append({"epoch": epoch + 1, "train_loss": total / steps_per_epoch, "test_accuracy": acc,
                        "step": (epoch + 1) * steps_per_epoch})
        if is_chief:
            print(f"epoch {epoch + 1}/{args.epochs} loss {total / steps_per_epoch:.4f} test_acc {acc:.4f}",
                  flush=True)
            _save(ckpt_dir, model.get_weights(), epoch + 1, history)

    logits = model(x_test, training=False)
    acc = float(np.mean(np.argmax(logits, axis=1) == y_test))
    if is_chief:
        metrics = {"test_accuracy": acc, "epochs": args.epochs, "steps": args.epochs * steps_per_epoch,
                   "steps_per_epoch": steps_per_epoch, "world_size": workers, "strategy": kind,
                   "train_seconds": time.time() - started, "history": history}
        storage.write_bytes(storage.join(args.job_dir, "metrics.json"), json.dumps(metrics, indent=2).encode())
        buf = io.BytesIO()
        np.savez(buf, *model.get_weights())
        storage.write_bytes(storage.join(args.job_dir, "model", "weights.npz"), buf.getvalue())
        print(f"final test_accuracy {acc:.4f}", flush=True)
    return 0


def _save(ckpt_dir: str, weights: list, epoch: int, history: list) -> None:
    buf = io.BytesIO()
    np.savez(buf, *weights)
    name = f"weights-{epoch:05d}.npz"
    storage.write_bytes(storage.join(ckpt_dir, name), buf.getvalue())
    storage.write_bytes(storage.join(ckpt_dir, "LATEST"),
                        json.dumps({"name": name, "epoch": epoch, "history": history}).encode())


def _load_latest(ckpt_dir: str):
    try:
        latest = json.loads(storage.read_bytes(storage.join(ckpt_dir, "LATEST")))
        data = np.load(io.BytesIO(storage.read_bytes(storage.join(ckpt_dir, latest["name"]))))
        return [data[f"arr_{i}"] for i in range(len(data.files))], latest["epoch"], latest["history"]
    except Exception:
        return None


if __name__ == "__main__":
    raise SystemExit(main())
