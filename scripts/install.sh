#!/usr/bin/env bash
# Installs everything torch_pjrt needs on a fresh Debian machine and builds it.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v ccache >/dev/null || need_apt+=(ccache)
command -v cmake >/dev/null || need_apt+=(cmake)
[ -f /usr/include/gtest/gtest.h ] || need_apt+=(libgtest-dev)
command -v g++ >/dev/null || need_apt+=(g++)
[ -f /usr/include/openssl/hmac.h ] || need_apt+=(libssl-dev)
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}"
fi

# torch is pinned: an unpinned torch would pull a multi-GB CUDA build.
python3 -m pip install -q torch==2.13.0 xla-cpu-pjrt==0.0.1 ninja pybind11 numpy pytest pytest-xdist expecttest ruff \
  transformers==5.25.0 accelerate==1.16.0
MAX_JOBS="${MAX_JOBS:-2}" python3 -m pip install -q --no-build-isolation -e .
