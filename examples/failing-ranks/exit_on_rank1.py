"""Rank 1 fails, the others finish: `trainctl launch --stack S -- python exit_on_rank1.py`."""
import os
import sys

print("rank", os.environ["RANK"], "leaving", flush=True)
sys.exit(1 if os.environ["RANK"] == "1" else 0)
