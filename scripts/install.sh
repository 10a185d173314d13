#!/usr/bin/env bash
# Installs what trainctl needs on a Debian machine, as root, idempotently:
#  - system packages for the local stack (its nodes are this machine: sshd, rsync, iptables,
#    iproute2, util-linux's unshare) and Debian's Python;
#  - the controller's virtualenv in .venv (Debian's interpreter, not one under /root: local
#    nodes get a private /root and must still run the GCS emulator from this tree);
#  - uv on PATH for the local nodes (on a GCP VM, bootstrap installs uv itself when missing).
set -euo pipefail
cd "$(dirname "$0")/.."

# sudo: simulated GCP machines give their metadata users GCE's passwordless sudo (google-sudoers).
# Containers (trainctl build, `container:` experiments): buildah builds and pushes, podman + runc run them on
# nodes, docker-registry is the local stack's registry, debootstrap makes the base image, skopeo reads
# a registry image's ENTRYPOINT (a Vertex containerSpec without command).
PKGS=(openssh-server openssh-client rsync iproute2 iptables util-linux procps python3 python3-venv ca-certificates sudo
      buildah podman runc catatonit docker-registry debootstrap skopeo)
missing=()
for p in "${PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
mkdir -p /run/sshd
# Debian's docker-registry package starts a registry on :5000 for the whole machine; trainctl runs
# one per stack in the stack's own namespace, so the system-wide one is stopped and disabled.
if [ -x /etc/init.d/docker-registry ]; then
  if command -v systemctl >/dev/null 2>&1; then systemctl disable --now docker-registry >/dev/null 2>&1 || true; fi
  /etc/init.d/docker-registry stop >/dev/null 2>&1 || true
  if command -v update-rc.d >/dev/null 2>&1; then update-rc.d docker-registry disable >/dev/null 2>&1 || true; fi
fi

VENV=.venv
stamp="$VENV/.installed-$(cat pyproject.toml scripts/install.sh | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  [ -x "$VENV/bin/python" ] || /usr/bin/python3 -m venv "$VENV"
  [ -x "$VENV/bin/uv" ] || "$VENV/bin/pip" install -q uv
  # Bytecode compiled once here: where PYTHONDONTWRITEBYTECODE is set (or the tree is
  # read-only) every trainctl command would otherwise compile ~1,000 modules before starting.
  # editable_mode=compat: a path in a .pth instead of setuptools' import finder, which cost
  # every Python start in this environment ~8 ms (`python -X importtime -c pass`: site 11 -> 2 ms).
  "$VENV/bin/uv" pip install -q --compile-bytecode --python "$VENV/bin/python" \
    --config-settings editable_mode=compat -e '.[test]'
  rm -f "$VENV"/.installed-*
  touch "$stamp"
fi
"$VENV/bin/python" -m compileall -q trainctl infra bootstrap trainers policy namespace_nodes gcpsim >/dev/null
install -m 0755 "$VENV/bin/uv" /usr/local/bin/uv
bash scripts/base-rootfs.sh
