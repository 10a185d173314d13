"""One module per simulated API; importing this package registers every handler and ticker."""

from gcpsim.apis import admin, serviceusage  # noqa: F401
from gcpsim.apis import crm  # noqa: F401
from gcpsim.apis import iam  # noqa: F401
from gcpsim.apis import iam_roles  # noqa: F401
from gcpsim.apis import access_tokens  # noqa: F401
from gcpsim.apis import compute_operations  # noqa: F401
from gcpsim.apis import compute_catalog  # noqa: F401
from gcpsim.apis import compute_quotas  # noqa: F401
from gcpsim.apis import cloudquotas  # noqa: F401
from gcpsim.apis import compute_network_profiles  # noqa: F401
from gcpsim.apis import compute_networks  # noqa: F401
from gcpsim.apis import compute_firewalls  # noqa: F401
from gcpsim.apis import compute_instances  # noqa: F401
from gcpsim.apis import compute_instance_updates  # noqa: F401
from gcpsim.apis import compute_reservations  # noqa: F401
from gcpsim.apis import compute_capacity  # noqa: F401
from gcpsim.apis import compute_spot  # noqa: F401
from gcpsim.apis import compute_maintenance  # noqa: F401
from gcpsim.apis import tpu  # noqa: F401
from gcpsim.apis import tpu_nodes  # noqa: F401
from gcpsim.apis import tpu_queued  # noqa: F401
from gcpsim.apis import storage  # noqa: F401
from gcpsim.apis import storage_objects  # noqa: F401
from gcpsim.apis import artifactregistry  # noqa: F401
from gcpsim.apis import container  # noqa: F401
from gcpsim.apis import container_ops  # noqa: F401
from gcpsim.apis import container_pools  # noqa: F401
from gcpsim.apis import cloudfunctions  # noqa: F401
from gcpsim.apis import run  # noqa: F401
from gcpsim.apis import scheduler  # noqa: F401
