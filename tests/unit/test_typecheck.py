"""infra/, trainctl/ and bootstrap/ type-check (pyproject's [tool.mypy]); infra/ against the
pulumi-gcp SDK's type hints: a misspelt argument of a GCP resource (or of the google-cloud
clients) fails here, not in `pulumi up`."""

import subprocess
import sys

from conftest import REPO

from infra.providers.stack_home import cache_dir


def test_the_code_typechecks_with_mypy():
    # mypy's incremental cache lives in the machine's trainctl cache, not in the checkout: a
    # fresh clone re-checks only what differs from the last run here (its files' hashes). A
    # machine's first run checks only the SDK modules the code calls (pyproject's overrides).
    cache = cache_dir() / "mypy"
    result = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(cache)], cwd=REPO,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
