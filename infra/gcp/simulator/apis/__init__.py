"""One module per simulated API; importing this package registers every handler and ticker."""

from infra.gcp.simulator.apis import admin, serviceusage  # noqa: F401
from infra.gcp.simulator.apis import crm  # noqa: F401
from infra.gcp.simulator.apis import iam  # noqa: F401
from infra.gcp.simulator.apis import iam_roles  # noqa: F401
