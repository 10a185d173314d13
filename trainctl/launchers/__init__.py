"""Launchers: a job on a realized cluster, as a LaunchPlan first, then that plan run.

protocol (the Launcher interface, LaunchPlan), ssh/ (nodes over pinned SSH: torchrun or the
program itself), gke/ (an Indexed Job through Kubernetes); what both share beside them.

The restart policy's defaults, AI Platform's, live here: torchrun restarts the worker group up
to 5 times, then trainctl reruns the whole job up to 3 times. The experiment file's `restart:`,
LaunchSpec and `trainctl launch` all read these, so the three cannot drift apart; here, in a
package that loads nothing, the CLI shows them in `--help` without importing the models.
"""

DEFAULT_MAX_RESTARTS = 5
DEFAULT_JOB_RETRIES = 3
