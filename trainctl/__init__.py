"""trainctl above the providers: launchers/ (a job on a realized cluster: SSH or GKE),
jobs/ (experiments, Vertex / AI Platform job specs, sweeps, images, collection: what `run`
composes) and cli/ (parsing and rendering). Each imports only the layers below it
(tests/unit/test_architecture.py)."""
