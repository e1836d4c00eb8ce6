#!/usr/bin/env bash
# Runs every test part, reports each part's result, and exits non-zero if any
# part failed: the GoogleTest suite of the torch-free core, ruff, pytest, the
# OpInfo regression sweep and the bad-input sweep's CI shard (the last two in
# pytest processes of their own).
set -uo pipefail
cd "$(dirname "$0")/.."

build_dir="${TORCH_PJRT_BUILD_DIR:-build}"
failed=()
results=()

part() {
  local name="$1"
  shift
  echo "==== $name: $*"
  local start=$SECONDS
  if "$@"; then
    results+=("PASS  $name ($((SECONDS - start)) s)")
  else
    results+=("FAIL  $name ($((SECONDS - start)) s)")
    failed+=("$name")
  fi
}

gtest() {
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null &&
    cmake --build "$build_dir" --target core_tests -j "${MAX_JOBS:-2}" &&
    (cd "$build_dir" && ctest --output-on-failure)
}

# pytest runs in TORCH_PJRT_TEST_WORKERS processes (pytest-xdist; 2 by
# default, 0 for one process): the suite is bound by compiles, which are
# single-threaded.
workers=(-n "${TORCH_PJRT_TEST_WORKERS:-2}")
python3 -c "import xdist" 2>/dev/null || workers=()

separate=(tests/python/test_op_coverage.py tests/python/test_bad_input_sweep.py)
deselect=()
for f in "${separate[@]}"; do deselect+=(--deselect "$f"); done

part googletest gtest
part ruff python3 -m ruff check python tests bench examples tools
part pytest python3 -m pytest -q "${workers[@]}" tests/python "${deselect[@]}" "$@"
part opinfo-regression python3 -m pytest -q "${workers[@]}" tests/python/test_op_coverage.py "$@"
if [ -f tests/python/test_bad_input_sweep.py ]; then
  part bad-input-shard python3 -m pytest -q "${workers[@]}" tests/python/test_bad_input_sweep.py "$@"
fi

echo "==== summary"
printf '%s\n' "${results[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed parts: ${failed[*]}"
  exit 1
fi
echo "all parts passed"
