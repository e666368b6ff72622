#!/usr/bin/env bash
# Installs the Debian packages tessel needs that this machine lacks (idempotent).
# Runs apt-get as root, or through sudo. Extra package names given as arguments are
# installed too (scripts/fuzz.sh asks for clang and its libFuzzer runtime).
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config
  libboost-graph-dev libeigen3-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenmpi-dev openmpi-bin
  python3 python3-numpy python3-matplotlib
  libprotobuf-dev protobuf-compiler
  "$@"
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
