"""Providers: a ClusterSpec becomes running nodes and back, behind one realizer protocol.

realizers (the protocol, documented once, and the registry that picks a stack's provider),
inventory (what a realized cluster is to the layers above), stack_home (per-stack state, locks),
host_keys, keys; one package per provider: local/ (this machine) and gcp/ (Google Cloud, with
the Pulumi program under gcp/program/ and the GCP simulator under gcp/simulator/). Code outside
this package never imports local/ or gcp/: it asks the registry.
"""
