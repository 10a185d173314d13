"""What a GPUDirect VM's host needs before its NCCL plugin can work, as shell lines bootstrap runs
once as root (bootstrap/gpunet.py, through infra/spec/gpu_networks.py). Data only.

- The Artifact Registry apt transport, through which Google ships the gIB plugin and TCPXO's
  kernel module (Cluster Toolkit examples/machine-learning/a4-highgpu-8g/a4high-vm.yaml and
  examples/machine-learning/a3-megagpu-8g/a3mega-slurm-*.yaml, "Setup apt-transport-artifact-registry").
- A3 Mega (GPUDirect-TCPXO): the plugin's LLCM reads the NIC's aperture devices (PCI 1ae0:0084)
  under /dev/aperture_devices (NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY) and imports GPU memory through
  the `import-helper` kernel module (/dev/dmabuf_import_helper). Google's A3 Mega Slurm images get
  both at image build: Cluster Toolkit (GoogleCloudPlatform/cluster-toolkit @1047080)
  examples/machine-learning/a3-megagpu-8g/a3mega-slurm-gcsfuse-lssd-blueprint.yaml lines 566-613
  (Ubuntu 22.04 accelerator image, as trainctl's GPU image: `dmabuf-import-helper` DKMS package
  from the gpudirect-tcpxo-apt repository; the udev rule /etc/udev/rules.d/00-a3-megagpu.rules
  that bind-mounts each aperture device there, then `update-initramfs -u -k all`), and
  a3mega-slurm-blueprint.yaml lines 298-415 (the same, skipped where `dkms status` says installed).
  On GKE, Google's installer loads the module with `modprobe import-helper`
  (GoogleCloudPlatform/container-engine-accelerators gpudirect-tcpxo/nccl-tcpxo-installer.yaml line 57).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass


@dataclass(frozen=True)
class HostSetup:
    """Shell lines run as root before the plugin is installed, and what they do, in words (a
    simulated node, which has no GPU NICs, says that instead of running them)."""

    what: str
    commands: tuple[str, ...]


AR_TRANSPORT = (
    "curl -fsSL https://packages.cloud.google.com/apt/doc/apt-key.gpg | gpg --dearmor --yes "
    "-o /usr/share/keyrings/cloud.google.gpg",
    "echo 'deb [signed-by=/usr/share/keyrings/cloud.google.gpg] http://packages.cloud.google.com/apt "
    "apt-transport-artifact-registry-stable main' > /etc/apt/sources.list.d/ar-transport.list && "
    "apt-get update && apt-get install -y apt-transport-artifact-registry",
)

# a3mega-slurm-gcsfuse-lssd-blueprint.yaml lines 583-590: the repository (unsigned, `trusted=yes`,
# as Google writes it) and the DKMS package, which builds the module for the running kernel.
_TCPXO_APT = "deb [arch=all trusted=yes] ar+https://us-apt.pkg.dev/projects/gce-ai-infra gpudirect-tcpxo-apt main"
# Built for the kernel that runs (the blueprint asks without -k: its image has one kernel).
_DMABUF_INSTALLED = 'dkms status -m dmabuf-import-helper -k "$(uname -r)" 2>/dev/null | grep -q installed'
_DMABUF = (f"if {_DMABUF_INSTALLED}; then echo 'dmabuf-import-helper: DKMS module already installed'; else "
           + " && ".join(AR_TRANSPORT)
           + f" && echo {shlex.quote(_TCPXO_APT)} > /etc/apt/sources.list.d/gpudirect-tcpxo.list"
           # The running kernel's headers, which DKMS builds against: a no-op where the image's
           # own DKMS drivers brought them (Google's images build theirs so: a3mega-slurm-blueprint.yaml
           # lines 136-139, "any module which supports DKMS ... (gVNIC, NVIDIA, ...)").
           ' && apt-get update && apt-get install -y dkms "linux-headers-$(uname -r)" dmabuf-import-helper; fi')
# The module by the name GKE's installer loads it (the package's source is import-helper.c:
# a3mega-slurm-blueprint.yaml line 370); listed for systemd-modules-load because this
# step is skipped by its fingerprint after a reboot, and the VM must come back with it loaded.
_IMPORT_HELPER = ("modprobe import-helper && "
                  "echo import-helper | tee /etc/modules-load.d/import-helper.conf >/dev/null")

# Google's rule, verbatim (a3mega-slurm-gcsfuse-lssd-blueprint.yaml lines 606-609).
APERTURE_RULES = "/etc/udev/rules.d/00-a3-megagpu.rules"
APERTURE_RULE = (
    'ACTION=="add", SUBSYSTEM=="pci", ATTR{vendor}=="0x1ae0", ATTR{device}=="0x0084", TAG+="systemd", \\',
    '    RUN+="/usr/bin/mkdir --mode=0755 -p /dev/aperture_devices", \\',
    '    RUN+="/usr/bin/systemd-mount --type=none --options=bind --collect %S/%p /dev/aperture_devices/%k", \\',
    """    RUN+="/usr/bin/bash -c '/usr/bin/chmod 0666 /dev/aperture_devices/%k/resource*'\"""",
)
_WRITE_RULE = "printf '%s\\n' " + " ".join(shlex.quote(line) for line in APERTURE_RULE)
# Google's images get the rule before first boot, so udev applies it as the devices appear; this
# VM booted without it, so the devices' `add` events are replayed once, where nothing is mounted.
_APERTURES_PRESENT = '[ -n "$(ls -A /dev/aperture_devices 2>/dev/null)" ]'
_APERTURES = (
    f"if ! {_WRITE_RULE} | cmp -s - {APERTURE_RULES}; then "
    f"{_WRITE_RULE} | tee {APERTURE_RULES} >/dev/null && update-initramfs -u -k all; fi && "
    f"if ! {_APERTURES_PRESENT}; then udevadm control --reload-rules && "
    "udevadm trigger --action=add --subsystem-match=pci --attr-match=vendor=0x1ae0 --attr-match=device=0x0084 "
    f"&& udevadm settle; fi && "
    f"if ! {_APERTURES_PRESENT}; then echo 'no aperture devices (PCI 1ae0:0084) under /dev/aperture_devices "
    f"after the udev rule {APERTURE_RULES}: GPUDirect-TCPXO cannot work on this VM' >&2; exit 6; fi")

TCPXO_HOST = HostSetup(
    what="the dmabuf-import-helper kernel module (DKMS) loaded and the aperture devices under /dev/aperture_devices "
         f"(udev rule {APERTURE_RULES})",
    commands=(_DMABUF, _IMPORT_HELPER, _APERTURES),
)
