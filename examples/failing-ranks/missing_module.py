"""A trainer whose requirements forgot a package."""
import os

print("rank", os.environ["RANK"], "importing", flush=True)
import wandb  # noqa: E402,F401
