"""A small trainer that reports its metric with the real cloudml-hypertune package, as AI Platform
samples do: a linear classifier on scikit-learn's digits, trained for a few epochs of mini-batches;
`epoch_acc` (the metric tag census/tf-keras/hptuning_config.yaml tunes) reported after each."""

import argparse

import hypertune
import numpy as np
from sklearn.datasets import load_digits
from sklearn.linear_model import SGDClassifier
from sklearn.model_selection import train_test_split


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=0.01)
    parser.add_argument("--num-epochs", type=int, default=3)
    parser.add_argument("--job-dir", required=True)
    args = parser.parse_args()
    x, y = load_digits(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(x / 16.0, y, test_size=0.25, random_state=0)
    model = SGDClassifier(learning_rate="constant", eta0=args.learning_rate, random_state=0)
    reporter = hypertune.HyperTune()
    rng = np.random.default_rng(0)
    for epoch in range(1, args.num_epochs + 1):
        order = rng.permutation(len(x_train))
        for start in range(0, len(order), args.batch_size):
            batch = order[start:start + args.batch_size]
            model.partial_fit(x_train[batch], y_train[batch], classes=np.arange(10))
        accuracy = model.score(x_test, y_test)
        print(f"epoch {epoch}: accuracy {accuracy:.4f} (job dir {args.job_dir})", flush=True)
        reporter.report_hyperparameter_tuning_metric(hyperparameter_metric_tag="epoch_acc",
                                                     metric_value=accuracy, global_step=epoch)


if __name__ == "__main__":
    main()
