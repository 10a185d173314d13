"""infra/, trainctl/ and bootstrap/ type-check (pyproject's [tool.mypy]); infra/ against the
pulumi-gcp SDK's type hints: a misspelt argument of a GCP resource (or of the google-cloud
clients) fails here, not in `pulumi up`."""

import subprocess
import sys

from conftest import REPO


def test_the_code_typechecks_with_mypy():
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
