#!/usr/bin/env bash
# Fetch the reference llama.cpp that vt is measured against (see ../shared/BENCH.md):
# prebuilt libraries from npm @node-llama-cpp/<platform>@3.21.1 and the matching headers
# from the git bundle inside node-llama-cpp@3.21.1. Everything lands in .cache/llama
# (ignored by git). Idempotent: a second run does nothing.
set -euo pipefail
version=3.21.1
root=$(cd "$(dirname "$0")/.." && pwd)
dest=${VT_LLAMA_DIR:-$root/.cache/llama}
case "$(uname -m)" in
  x86_64) platform=linux-x64 ;;
  aarch64) platform=linux-arm64 ;;
  *) echo "fetch-llama: no prebuilt llama.cpp for $(uname -m)" >&2; exit 1 ;;
esac
if [ -f "$dest/.done-$version" ]; then exit 0; fi
mkdir -p "$dest/npm"
cd "$dest/npm"
[ -f "node-llama-cpp-$platform-$version.tgz" ] || npm pack --silent "@node-llama-cpp/$platform@$version" >/dev/null
[ -f "node-llama-cpp-$version.tgz" ] || npm pack --silent "node-llama-cpp@$version" >/dev/null
rm -rf "$dest/bins" "$dest/src" && mkdir -p "$dest/bins" "$dest/tmp"
tar -xzf "node-llama-cpp-$platform-$version.tgz" -C "$dest/tmp"
mv "$dest/tmp/package/bins/$platform"/* "$dest/bins/"
rm -rf "$dest/tmp" && mkdir -p "$dest/tmp"
tar -xzf "node-llama-cpp-$version.tgz" -C "$dest/tmp" package/llama/gitRelease.bundle
git -c advice.detachedHead=false clone -q "$dest/tmp/package/llama/gitRelease.bundle" "$dest/src"
rm -rf "$dest/tmp"
# The prebuilt sonames are versioned; give the linker plain names too.
cd "$dest/bins"
ln -sf libllama.v0.4.0.so libllama.so
ln -sf libggml.v0.4.0.so libggml.so
touch "$dest/.done-$version"
echo "fetch-llama: reference llama.cpp $version in $dest"
