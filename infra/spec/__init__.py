"""The specification layer: typed inputs, checked against the catalog, with no effect on the world.

catalog (machine types, accelerators, zones, runtimes, prices), accelerator (Cpu, Gpu, Tpu),
cluster (ClusterSpec), stack_config (stack files → ClusterSpec), cost (list-price estimates),
job_runtimes (what a job's runtime installs). Everything above (providers, bootstrap, launchers,
jobs, cli) reads these; nothing here imports them. Kept empty so that importing one module does
not load the models.
"""
