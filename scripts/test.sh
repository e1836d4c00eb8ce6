#!/usr/bin/env bash
# Runs every test: the GoogleTest suite of the torch-free core, then pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir="${TORCH_PJRT_BUILD_DIR:-build}"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build_dir" --target core_tests -j "${MAX_JOBS:-2}"
(cd "$build_dir" && ctest --output-on-failure)

python3 -m ruff check python tests bench examples
# The OpInfo regression sweep compiles ~650 ops' programs: it runs in a process of its own.
python3 -m pytest -q tests/python --deselect tests/python/test_op_coverage.py "$@"
python3 -m pytest -q tests/python/test_op_coverage.py "$@"
