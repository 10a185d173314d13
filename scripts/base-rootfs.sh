#!/usr/bin/env bash
# The base of trainctl's container images: a Debian 12 rootfs with Python 3.11 (the controller's
# interpreter, so the uv cache's wheels fit), made with debootstrap from Debian's own mirror and
# cached as a tar. Nothing comes from a public container registry. Idempotent: skipped when the
# tar exists.
set -euo pipefail
CACHE="${TRAINCTL_CACHE:-/var/cache/trainctl}"
OUT="$CACHE/base/debian-bookworm-python3.tar"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
[ -f "$OUT" ] && exit 0
mkdir -p "$CACHE/base"
work="$(mktemp -d "$CACHE/base/rootfs.XXXXXX")"
trap 'rm -rf "$work"' EXIT
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
  bookworm "$work/rootfs" "$MIRROR" > "$work/debootstrap.log" 2>&1 \
  || { tail -20 "$work/debootstrap.log" >&2; exit 1; }
rm -rf "$work/rootfs"/var/cache/apt/archives/*.deb "$work/rootfs"/var/lib/apt/lists/*
tar --numeric-owner -C "$work/rootfs" -cf "$work/rootfs.tar" .
mv "$work/rootfs.tar" "$OUT"
