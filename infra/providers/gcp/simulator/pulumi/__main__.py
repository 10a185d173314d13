"""`python -m infra.providers.gcp.simulator.pulumi <args>`: the stand-in `pulumi` command."""

from infra.providers.gcp.simulator.pulumi.cli import main

raise SystemExit(main())
