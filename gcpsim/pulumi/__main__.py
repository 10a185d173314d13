"""`python -m gcpsim.pulumi <args>`: the stand-in `pulumi` command."""

from gcpsim.pulumi.cli import main

raise SystemExit(main())
