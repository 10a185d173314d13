"""Which machine types have MRDMA NICs (GPU NICs on an RDMA network profile's network):
https://cloud.google.com/vpc/docs/rdma-network-profiles (the RoCE profile serves A3 Ultra and A4, "in the
same zones as their supported machine types"); https://cloud.google.com/compute/docs/gpus/gpu-network-bandwidth
("A4 and A3 Ultra ... eight CX7 NICs"); Cluster Toolkit examples/machine-learning/a4-highgpu-8g/a4high-vm.yaml
(nic_type MRDMA on the RoCE VPC)."""

from __future__ import annotations

MRDMA_MACHINE_TYPES: tuple[str, ...] = ("a3-ultragpu-8g", "a4-highgpu-8g")
