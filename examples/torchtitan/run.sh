#!/usr/bin/env bash
# TorchTitan 0.2.2 (PyPI) trains its llama3 debug model on torch_pjrt's `tpu` device:
# 10 steps with one process, 10 steps with two FSDP2 processes (data_parallel_shard_degree=2)
# at the same global batch, then compares the losses. Issue 40, "TorchTitan, as a real client".
#
#   examples/torchtitan/run.sh [WORKDIR]
#
# WORKDIR (default: a new temp dir, kept) gets the tokenizer, the dataset, the config, the seed
# checkpoint, the logs and the losses. Exits non-zero if a loss is not finite, does not start near
# ln(2048) or does not fall, if the 2-rank losses differ from the 1-rank ones by more than
# TITAN_ATOL + TITAN_RTOL*|loss| (default 1e-5 each), or if any op ran on the CPU (the runs set
# TORCH_PJRT_FALLBACK=error, and torch_pjrt.metrics()["fallback_ops"] is checked on every rank).
#
# TorchTitan goes into its own venv, TITAN_VENV (default ~/.cache/torch_pjrt-titan-venv, beside the
# compile cache, not inside it), made with --system-site-packages on top of the python that has
# torch and torch_pjrt (PYTHON, default python3); the install pins torch to the installed version in the same pip command, so pip never
# changes it, and the script checks `pip show torch` after. The venv takes about 1.4 GB (pyarrow,
# triton, tensorboard); it is not part of scripts/install.sh.
#
# Knobs: TITAN_STEPS (10), TITAN_SEQ_LEN (128), TITAN_BATCH (global batch, 4), TITAN_TIMEOUT
# (seconds per torchrun, 600).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PYTHON=${PYTHON:-python3}
VENV=${TITAN_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/torch_pjrt-titan-venv}
WD=${1:-$(mktemp -d /tmp/torchtitan-tpu.XXXXXX)}
STEPS=${TITAN_STEPS:-10}
SEQ_LEN=${TITAN_SEQ_LEN:-128}
BATCH=${TITAN_BATCH:-4}
TMO=${TITAN_TIMEOUT:-600}
mkdir -p "$WD"
WD=$(cd "$WD" && pwd)
t_all=$(date +%s.%N)
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$(date +%s.%N)"; }

# ---- 1. the venv, torchtitan pinned, torch untouched
TORCH_VERSION=$("$PYTHON" -c "import torch; print(torch.__version__.split('+')[0])")
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import torchtitan, triton" 2>/dev/null; then
  echo "== creating $VENV (torchtitan 0.2.2, torch stays $TORCH_VERSION)"
  "$PYTHON" -m venv --system-site-packages "$VENV"
  # triton: torchtitan/models/moe/kernels.py imports it unconditionally (not in its declared deps).
  "$VENV/bin/pip" install --quiet "torch==$TORCH_VERSION" \
    torchtitan==0.2.2 triton==3.9.0 datasets==5.2.0 torchdata==0.11.0 tyro==1.0.17 tensorboard==2.21.0
fi
VENV_TORCH=$("$VENV/bin/pip" show torch 2>/dev/null | sed -n 's/^Version: //p')
if [ "${VENV_TORCH%%+*}" != "$TORCH_VERSION" ]; then
  echo "FAIL: torch in $VENV is $VENV_TORCH, expected $TORCH_VERSION" >&2; exit 1
fi
"$VENV/bin/python" -c "import torch_pjrt" || { echo "FAIL: torch_pjrt not importable from $VENV" >&2; exit 1; }
echo "== venv $VENV: torch $VENV_TORCH, torchtitan $("$VENV/bin/pip" show torchtitan | sed -n 's/^Version: //p')"

# ---- 2. tokenizer, dataset, config
"$VENV/bin/python" "$HERE/prepare.py" "$WD" --seq-len "$SEQ_LEN" --batch "$BATCH" --steps "$STEPS" --ranks 2

# ---- 3. the runs (loopback, offline, no CPU fallback allowed)
export HF_HOME="$WD/hf" HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1
export GLOO_SOCKET_IFNAME=lo MASTER_ADDR=127.0.0.1 TORCH_PJRT_FALLBACK=error
export PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}"   # pjrt_report.py
train() {  # train NAME NPROC ARGS...
  local name=$1 nproc=$2; shift 2
  local t0; t0=$(date +%s.%N)
  echo "== $name: torchrun --standalone --nproc-per-node=$nproc -m torchtitan.train --job.config-file $WD/debug_model.toml $*"
  if ! TITAN_PJRT_REPORT_DIR="$WD/$name" timeout "$TMO" \
      "$VENV/bin/python" -m torch.distributed.run --standalone --nproc-per-node="$nproc" \
      -m torchtitan.train --job.config-file "$WD/debug_model.toml" --job.dump-folder "$WD/$name" \
      --experimental.custom-import pjrt_report "$@" > "$WD/$name.log" 2>&1; then
    tail -n 60 "$WD/$name.log"; echo "FAIL: $name (log: $WD/$name.log)" >&2; exit 1
  fi
  # every rank prints the step lines: show each step once
  grep -E "step: *[0-9]+ +loss" "$WD/$name.log" | sed -e 's/^.* - INFO - /   /' | awk '!seen[$2]++' || true
  echo "   $name took $(elapsed "$t0") s"
}
# Both runs start from one seed checkpoint (TorchTitan's own way to compare parallelisms): the
# full model initialized once on the CPU, loaded by each run into its plain or sharded model.
rm -rf "$WD/seed_ckpt"
train seed 1 --checkpoint.no-load-only --checkpoint.create-seed-checkpoint \
  --parallelism.data-parallel-shard-degree 1 --metrics.no-enable-tensorboard
train out1 1 --parallelism.data-parallel-shard-degree 1 \
  --training.local-batch-size "$BATCH" --training.dataset-path "$WD/data_1rank"
train out2 2 --parallelism.data-parallel-shard-degree 2 \
  --training.local-batch-size $((BATCH / 2)) --training.dataset-path "$WD/data_2rank"

# ---- 4. compare
rc=0
"$VENV/bin/python" "$HERE/compare.py" "$WD" --steps "$STEPS" \
  --rtol "${TITAN_RTOL:-1e-5}" --atol "${TITAN_ATOL:-1e-5}" || rc=$?
echo "== whole script: $(elapsed "$t_all") s; work dir $WD"
exit $rc
