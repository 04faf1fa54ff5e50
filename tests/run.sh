#!/usr/bin/env bash
# CPU test suite (no GPU needed): builds fusetune with its tests and runs the C++ tests and the
# Python/CLI tests through ctest. Needs what scripts/setup.sh needs plus GoogleTest, PyTorch
# and pytest; the shared models are read from ../shared/models (or FUSETUNE_MODELS_DIR).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
FUSETUNE_TESTS=ON bash "$ROOT/scripts/setup.sh"
ctest --test-dir "$ROOT/build" --output-on-failure
