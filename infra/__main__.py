"""The Pulumi program's old entry point (Pulumi.yaml said `main: infra/` before the program
moved under infra/providers/gcp/program/): projects that `trainctl init` wrote then import this
module, and still get the installed program."""

import infra.providers.gcp.program.__main__  # noqa: F401  (declares the stack's resources on import)
