"""The command line: parsing and rendering only; the verbs call the layers below.

Kept empty: `trainctl --help` loads only entry.py, the verb modules and what typer needs
(bench/cli_start.py)."""
