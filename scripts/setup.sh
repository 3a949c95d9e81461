#!/usr/bin/env bash
# Installs the Debian packages Pact needs to build and test (SPEC §3). Idempotent: installs only
# what is missing. Run as root (or with sudo available) on Debian 12.
set -euo pipefail

required=(
  build-essential cmake ninja-build pkg-config git python3
  nlohmann-json3-dev libyaml-cpp-dev libtomlplusplus-dev libcli11-dev libfmt-dev
  libssl-dev libopenblas-dev zlib1g-dev libseccomp-dev libcpuinfo-dev libzip-dev libsentencepiece-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev clang-format clang-tidy
  python3-torch python3-torchvision python3-sentencepiece python3-clang-14
  pybind11-dev python3-dev python3-numpy python3-pytest libdlpack-dev libgraphviz-dev
  chromium chromium-driver python3-selenium
  libopenmpi-dev openmpi-bin iproute2 util-linux
)

missing=()
for pkg in "${required[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "setup: all ${#required[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
