#!/usr/bin/env bash
# Install what building and testing vt needs on Debian 12: compilers and libraries
# from apt, the reference llama.cpp from npm. Safe to run again.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pkgs=(build-essential cmake pkg-config git libmicrohttpd-dev libjansson-dev
      clang libclang-rt-14-dev curl
      gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)
missing=()
# Node.js and npm: Debian's packages only where no node is installed already (a
# node from elsewhere ships its own npm, and Debian's npm would conflict with it).
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
"$root/scripts/fetch-llama.sh"
# The npm clients of the server tests (package.json, package-lock.json: the
# official openai package), installed when missing or when the lock changed.
if [ ! -d "$root/node_modules/openai" ] || [ "$root/package-lock.json" -nt "$root/node_modules/.package-lock.json" ]; then
  (cd "$root" && npm ci --no-audit --no-fund --loglevel=error)
fi
