#!/usr/bin/env bash
# Builds the fusetune tuner into build/. Needs CMake, a C++17 compiler and the CUDA toolkit;
# running it needs PyTorch and an NVIDIA GPU. Header-only dependencies (nlohmann/json, CLI11) come
# from FUSETUNE_DEPS_DIR (a folder with include/nlohmann/json.hpp and include/CLI/CLI.hpp) when
# set, else from installed packages, else they are downloaded.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S "$ROOT" -B "$ROOT/build" "${generator[@]}" -DFUSETUNE_TESTS="${FUSETUNE_TESTS:-OFF}" \
  ${FUSETUNE_DEPS_DIR:+-DFUSETUNE_DEPS_DIR=$FUSETUNE_DEPS_DIR}
cmake --build "$ROOT/build" -j "$(nproc)"
