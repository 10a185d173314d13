"""The restart policy's defaults, AI Platform's: torchrun restarts the worker group up to 5 times,
then trainctl reruns the whole job up to 3 times. The experiment file's `restart:`, LaunchSpec
and `trainctl launch` all read these, so the three cannot drift apart. A module of its own so
the CLI shows them in `--help` without importing the models."""

DEFAULT_MAX_RESTARTS = 5
DEFAULT_JOB_RETRIES = 3
