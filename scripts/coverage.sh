#!/usr/bin/env bash
# Line coverage of the product code (pyproject's [tool.coverage.run]) over the README's test
# command, the trainctl processes the end-to-end tests start included. Extra arguments go to
# pytest (a tier: `bash scripts/coverage.sh tests/unit`). Prints the total and writes
# .coverage-data/report.txt, one line per module.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
rm -rf .coverage-data && mkdir .coverage-data
status=0
.venv/bin/python -m coverage run -m pytest -q "$@" || status=$?
.venv/bin/python -m coverage combine -q
.venv/bin/python -m coverage report > .coverage-data/report.txt
tail -1 .coverage-data/report.txt
exit $status
