"""One module per simulated API; importing this package registers every handler and ticker."""

from infra.gcp.simulator.apis import admin, serviceusage  # noqa: F401
