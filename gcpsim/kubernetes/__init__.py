"""The Kubernetes API of simulated GKE clusters (see control_planes.py for their life).

objects.py    what the API server checks, and its Status errors
store.py      objects, resourceVersions, watch streams, container logs
jobs.py       the Job controller and the garbage collector; the pod runner interface
jobsets.py    JobSet's controller and a minimal Kueue admission (quota of a ClusterQueue)
crds.py       the CRDs an admin installs (JobSet's, Kueue's), API discovery (GET /apis)
api.py        the HTTP(S) front end with bearer-token authentication
scripted.py   pods that print scripted lines and exit as scripted (tests of what drives Jobs)
processes.py  pods as processes on this machine (a simulated cluster's kubelet)
images.py     what stands in for a pod's container image
auth.py       the gke-gcloud-auth-plugin stand-in and the token it hands out
"""
