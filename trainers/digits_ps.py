"""Reference parameter-server trainer: TensorFlow's ParameterServerStrategy on scikit-learn's
digits, with every role AI Platform / Vertex AI gives a replica (TF_CONFIG, nothing
trainctl-specific):

  chief      the coordinator: variables live on the parameter servers, training steps are
             scheduled on the workers; after each epoch it writes the weights to the job dir
  worker/ps  a `tf.distribute.Server` that serves until the job is over
  evaluator  not part of the cluster: evaluates each checkpoint as it appears in the job dir,
             writes `eval/results.json`, and ends after the final one

A custom training loop (ClusterCoordinator), not Keras' fit: Keras 3 does not train under
ParameterServerStrategy.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import time

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TF's C++ info lines would bury the progress
import tensorflow as tf  # noqa: E402

from trainers import storage  # noqa: E402
from trainers.digits_data import default_job_dir, split  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--job-dir", default=None,
                   help="gs:// or local dir (default: the parent of $AIP_MODEL_DIR, as Vertex AI sets it)")
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--lr", type=float, default=0.005)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-timeout", type=float, default=600.0,
                   help="evaluator: give up after this many seconds without a new checkpoint")
    args = p.parse_args(argv)
    args.job_dir = args.job_dir or default_job_dir()
    return args


class Mlp(tf.Module):
    """Two hidden layers as plain variables: under the strategy's scope they live on the ps."""

    def __init__(self, hidden: int, seed: int) -> None:
        super().__init__()
        init = tf.keras.initializers.GlorotUniform(seed=seed)
        shapes = [(64, hidden), (hidden,), (hidden, hidden), (hidden,), (hidden, 10), (10,)]
        self.params = [tf.Variable(init(s) if len(s) == 2 else tf.zeros(s)) for s in shapes]

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        w1, b1, w2, b2, w3, b3 = self.params
        h = tf.nn.relu(x @ w1 + b1)
        h = tf.nn.relu(h @ w2 + b2)
        return h @ w3 + b3


def accuracy(weights: list[np.ndarray], x: np.ndarray, y: np.ndarray) -> float:
    w1, b1, w2, b2, w3, b3 = weights
    h = np.maximum(x @ w1 + b1, 0)
    h = np.maximum(h @ w2 + b2, 0)
    return float(np.mean(np.argmax(h @ w3 + b3, axis=1) == y))


def save_weights(job_dir: str, epoch: int, weights: list[np.ndarray], final: bool) -> None:
    buf = io.BytesIO()
    np.savez(buf, *weights)
    name = f"weights-{epoch:05d}.npz"
    storage.write_bytes(storage.join(job_dir, "checkpoints", name), buf.getvalue())
    storage.write_bytes(storage.join(job_dir, "checkpoints", "LATEST"),
                        json.dumps({"name": name, "epoch": epoch, "final": final}).encode())


def run_server(resolver: tf.distribute.cluster_resolver.ClusterResolver) -> int:
    server = tf.distribute.Server(resolver.cluster_spec(), job_name=resolver.task_type,
                                  task_index=resolver.task_id, protocol=resolver.rpc_layer or "grpc",
                                  start=True)
    print(f"{resolver.task_type}:{resolver.task_id} serving", flush=True)
    server.join()  # until the job is over and trainctl (or Vertex) stops this replica
    return 0


def run_chief(args: argparse.Namespace, resolver: tf.distribute.cluster_resolver.ClusterResolver) -> int:
    x_train, y_train, x_test, y_test = split(args.seed)
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    workers = resolver.cluster_spec().num_tasks("worker")
    print(f"chief: coordinating {workers} worker(s) and "
          f"{resolver.cluster_spec().num_tasks('ps')} ps, job dir {args.job_dir}", flush=True)
    with strategy.scope():
        tf.random.set_seed(args.seed)
        model = Mlp(args.hidden, args.seed)
        optimizer = tf.keras.optimizers.Adam(learning_rate=args.lr)

    def dataset_fn() -> tf.data.Dataset:
        return (tf.data.Dataset.from_tensor_slices((x_train, y_train)).shuffle(len(x_train), seed=args.seed)
                .repeat().batch(args.batch_size))

    iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))

    @tf.function
    def step(it):
        def replica_fn(features, labels):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, model(features)))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        features, labels = next(it)
        return strategy.run(replica_fn, args=(features, labels))

    steps_per_epoch = len(x_train) // args.batch_size
    started, history = time.time(), []
    for epoch in range(args.epochs):
        losses = [coordinator.schedule(step, args=(iterator,)) for _ in range(steps_per_epoch)]
        coordinator.join()
        loss = float(np.mean([r.fetch() for r in losses]))
        weights = [v.numpy() for v in model.params]
        acc = accuracy(weights, x_test, y_test)
        history.append({"epoch": epoch + 1, "train_loss": loss, "test_accuracy": acc,
                        "step": (epoch + 1) * steps_per_epoch})
        print(f"epoch {epoch + 1}/{args.epochs} loss {loss:.4f} test_acc {acc:.4f} "
              f"step {(epoch + 1) * steps_per_epoch}", flush=True)
        save_weights(args.job_dir, epoch + 1, weights, final=epoch + 1 == args.epochs)
    metrics = {"test_accuracy": history[-1]["test_accuracy"], "epochs": args.epochs,
               "steps": args.epochs * steps_per_epoch, "steps_per_epoch": steps_per_epoch,
               "workers": workers, "strategy": "ParameterServerStrategy",
               "train_seconds": time.time() - started, "history": history}
    storage.write_bytes(storage.join(args.job_dir, "metrics.json"), json.dumps(metrics, indent=2).encode())
    print(f"final test_accuracy {metrics['test_accuracy']:.4f}", flush=True)
    return 0


def run_evaluator(args: argparse.Namespace) -> int:
    """A sidecar evaluator, as TF's docs describe it: checkpoints in, results out."""
    _, _, x_test, y_test = split(args.seed)
    ckpt_dir = storage.join(args.job_dir, "checkpoints")
    seen, results = None, []
    deadline = time.monotonic() + args.eval_timeout
    while time.monotonic() < deadline:
        try:
            latest = json.loads(storage.read_bytes(storage.join(ckpt_dir, "LATEST")))
        except Exception:
            time.sleep(1)
            continue
        if latest["name"] != seen:
            seen, deadline = latest["name"], time.monotonic() + args.eval_timeout
            data = np.load(io.BytesIO(storage.read_bytes(storage.join(ckpt_dir, latest["name"]))))
            acc = accuracy([data[f"arr_{i}"] for i in range(len(data.files))], x_test, y_test)
            results.append({"epoch": latest["epoch"], "checkpoint": latest["name"], "test_accuracy": acc})
            print(f"evaluator: {latest['name']} test_acc {acc:.4f}", flush=True)
            storage.write_bytes(storage.join(args.job_dir, "eval", "results.json"),
                                json.dumps(results, indent=2).encode())
            if latest.get("final"):
                return 0
        time.sleep(1)
    print(f"evaluator: no new checkpoint for {args.eval_timeout:g} s; giving up", flush=True)
    return 1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    tf_config = json.loads(os.environ.get("TF_CONFIG", "{}"))
    task = tf_config.get("task", {}).get("type")
    if task == "evaluator":
        return run_evaluator(args)
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if task in ("worker", "ps"):
        return run_server(resolver)
    if task != "chief":
        raise SystemExit("TF_CONFIG names no chief/worker/ps/evaluator task: run on a cluster "
                         "with worker pools (chief, worker, ps)")
    return run_chief(args, resolver)


if __name__ == "__main__":
    raise SystemExit(main())
