"""The Pulumi program of a GCP stack: the components (Storage, Network, GpuVmGroup, TpuVm,
GkeCluster, ImageRegistry, ScheduledReaper) and `cluster.build`, which `__main__.py` runs under
`pulumi up` (Pulumi.yaml: `main: infra/providers/gcp/program/`) and the realizer through the
Automation API; `mocks` evaluates it offline."""
