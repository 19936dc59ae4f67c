#!/usr/bin/env bash
# Debian packages the tests use: a real Prometheus (and promtool), the eBPF toolchain, headless Chromium,
# kubectl. Installs only what is missing; without root it says what to install and lets tests skip.
set -euo pipefail
packages=(prometheus clang llvm libbpf-dev bpftool xdp-tools iproute2 make chromium)
missing=()
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "system packages: all present"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "system packages missing (tests that need them will skip): ${missing[*]}" >&2
  echo "install with: sudo apt-get install -y ${missing[*]}" >&2
  exit 0
fi
echo "installing system packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
