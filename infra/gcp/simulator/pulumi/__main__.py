"""`python -m infra.gcp.simulator.pulumi <args>`: the stand-in `pulumi` command."""

from infra.gcp.simulator.pulumi.cli import main

raise SystemExit(main())
