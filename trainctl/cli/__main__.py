"""`python -m trainctl.cli`: the same as the `trainctl` command."""

from trainctl.cli.entry import main

main()
