"""Jobs on GKE: the launch spec as a headless Service and an Indexed Job (manifests), followed
to its end through the Kubernetes API (job)."""
