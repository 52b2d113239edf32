#!/usr/bin/env bash
# The GPU check of ddpadvisor (see README.md beside this file). Run from anywhere:
#
#   OUT=/some/empty/folder bash bench/gpu_check/run.sh [--cpu]
#
# Runs the probe suite and four tiny traced DDP jobs, each step under its own timeout, never
# stopping at a failed step, and always ends by writing $OUT/gpu_check.tar.gz (everything) and
# $OUT/gpu_check.log (one line per step: exit code, seconds, note). --cpu (or no CUDA) runs
# the same steps with gloo on the CPU, the "nccl" steps with gloo and one rank.
# Knobs: PYTHON (default: the first of python3, /opt/torch/.venv/bin/python3 with torch),
# GPU_CHECK_BUDGET (seconds for all steps, default 210), GPU_CHECK_KEEP=1 (keep the work dir),
# GPU_CHECK_ONLY="step step ..." (run only these steps; the rest are recorded as skipped).
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
cd "$REPO" || exit 2
OUT=${OUT:-/tmp/gpu_check_out}
BUDGET=${GPU_CHECK_BUDGET:-210}
RESERVE=20  # seconds kept for packing the results
MODE=auto
for arg in "$@"; do
  case $arg in
    --cpu) MODE=cpu ;;
    *) echo "usage: OUT=DIR bash bench/gpu_check/run.sh [--cpu]" >&2; exit 2 ;;
  esac
done

mkdir -p "$OUT"
TMPROOT=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")
WORK=$TMPROOT/gpu_check
mkdir -p "$WORK/logs"
STEPS=$WORK/steps.tsv
SUMMARY=$OUT/gpu_check.log
TOKEN="gpucheck$$"
AGENT=$REPO/ddpadvisor/tracing/agent
printf 'step\trc\tseconds\ttimeout\tnote\n' >"$STEPS"
: >"$SUMMARY"

say() { echo "[gpu_check $(date +%H:%M:%S) +${SECONDS}s] $*" | tee -a "$SUMMARY"; }

# Every process a step started carries GPU_CHECK_TOKEN=<token>.<step> in its environment;
# torchrun starts its workers in their own sessions, so after a timeout those that outlived
# their launcher are found by that marker and killed by pid.
reap() {
  local tok=$1 dir pid
  for dir in /proc/[0-9]*; do
    pid=${dir#/proc/}
    [ "$pid" = "$$" ] && continue
    if { tr '\0' '\n' <"$dir/environ"; } 2>/dev/null | grep -qx "GPU_CHECK_TOKEN=$tok"; then
      kill -KILL "$pid" 2>/dev/null && say "  killed leftover process $pid of $tok"
    fi
  done
}

record() {  # name rc seconds timeout note
  printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" >>"$STEPS"
  say "$(printf '%-22s rc=%-4s %6ss (timeout %ss) %s' "$1" "$2" "$3" "$4" "$5")"
}

# run_step NAME CAP_SECONDS CMD...: runs CMD with output in logs/NAME.log, under
# min(CAP, what is left of the budget); never fails the script.
run_step() {
  local name=$1 cap=$2 left limit t0 t1 rc note
  shift 2
  if [ -n "${GPU_CHECK_ONLY:-}" ] && [[ " $GPU_CHECK_ONLY " != *" $name "* ]]; then
    record "$name" skip 0 0 "not selected (GPU_CHECK_ONLY)"
    return 0
  fi
  left=$((BUDGET - SECONDS - RESERVE))
  if [ "$left" -lt 15 ]; then
    record "$name" skip 0 0 "skipped: the time budget (${BUDGET}s) is spent"
    return 0
  fi
  limit=$((cap < left ? cap : left))
  say "start $name: $*"
  printf '$ %s\n' "$*" >"$WORK/logs/$name.log"
  t0=$(date +%s.%N)
  env GPU_CHECK_TOKEN="$TOKEN.$name" timeout -k 10 "$limit" "$@" >>"$WORK/logs/$name.log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  reap "$TOKEN.$name"
  case $rc in
    0) note=ok ;;
    124) note="TIMED OUT after ${limit}s" ;;
    137) note="KILLED (timeout -k, or out of memory)" ;;
    *) note="FAILED: $(grep -E 'Error|error:|FAILED|Traceback' "$WORK/logs/$name.log" | tail -n 1 | cut -c1-160)" ;;
  esac
  record "$name" "$rc" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}')" "$limit" "$note"
}

finished=0
finish() {
  [ "$finished" = 1 ] && return
  finished=1
  say "packing results (${SECONDS}s since start)"
  cp "$SUMMARY" "$WORK/gpu_check.log" 2>/dev/null
  tar -czf "$OUT/gpu_check.tar.gz" -C "$TMPROOT" gpu_check 2>>"$SUMMARY"
  local size
  size=$(stat -c %s "$OUT/gpu_check.tar.gz" 2>/dev/null || echo 0)
  if [ "$size" -gt $((15 * 1024 * 1024)) ]; then  # the way back takes files up to 16 MiB
    say "archive is $size bytes: packing again without logs and stack dumps"
    tar -czf "$OUT/gpu_check.tar.gz" -C "$TMPROOT" --exclude='gpu_check/logs' \
      --exclude='*.stack' gpu_check 2>>"$SUMMARY"
  fi
  say "wrote $OUT/gpu_check.tar.gz ($(stat -c %s "$OUT/gpu_check.tar.gz" 2>/dev/null) bytes)"
  [ "${GPU_CHECK_KEEP:-0}" = 1 ] && say "work dir kept: $WORK" || rm -rf "$TMPROOT"
}
trap finish EXIT
trap 'say "interrupted"; exit 130' INT TERM

# ---------------------------------------------------------------- which python, which mode
# One torch import per candidate: it finds the python and whether CUDA is there.
PY='' CUDA=''
for candidate in ${PYTHON:-python3 /opt/torch/.venv/bin/python3 python}; do
  CUDA=$("$candidate" -c 'import torch; print(int(torch.cuda.is_available()))' 2>/dev/null) &&
    PY=$candidate && break
done
if [ -z "$PY" ]; then
  record preflight 2 0 0 "no python with torch found (set PYTHON)"
  exit 0
fi
if [ "$MODE" = auto ]; then
  if [ "$CUDA" = 1 ]; then MODE=gpu; else MODE=cpu; fi
fi
if [ "$MODE" = gpu ]; then
  DEV=cuda NCCL=nccl
else
  DEV=cpu NCCL=gloo
fi
say "mode $MODE (device $DEV, single-rank backend $NCCL), python $PY, repo $REPO, budget ${BUDGET}s"
printf 'mode=%s\ndevice=%s\nsingle_rank_backend=%s\npython=%s\nbudget=%s\n' \
  "$MODE" "$DEV" "$NCCL" "$PY" "$BUDGET" >"$WORK/mode.txt"

TORCHRUN=("$PY" -m torch.distributed.run --standalone --max_restarts 0 --monitor_interval 0.1)
TINY=bench/gpu_check/train_tiny.py
PROBE_ARGS=(--timeout 30 --model "$TINY:build_model" --setup "$TINY:seed_everything"
  --dataset-size 960 --batch-size 16 --calls-set-epoch yes)

# traced NAME NPROC TRAIN_ARGS...: a tiny DDP job with the trace agent, set up as
# `ddpadvisor trace --print-env` does: the agent folder first on PYTHONPATH, DDPADVISOR_TRACE.
traced() {
  local name=$1 nproc=$2
  shift 2
  mkdir -p "$WORK/$name/trace"
  run_step "$name" 75 env PYTHONPATH="$AGENT${PYTHONPATH:+:$PYTHONPATH}" \
    DDPADVISOR_TRACE="$WORK/$name/trace" DDPADVISOR_TRACE_EVERY=5 \
    "${TORCHRUN[@]}" --nproc_per_node "$nproc" "$TINY" --summary "$WORK/$name/job" "$@"
  cp "$WORK/logs/$name.log" "$WORK/$name/trace/torchrun.log" 2>/dev/null
}

# ---------------------------------------------------------------- the steps
if command -v nvidia-smi >/dev/null 2>&1; then
  run_step nvidia_smi 20 bash -c "nvidia-smi; echo; nvidia-smi -q"
  [ -f "$WORK/logs/nvidia_smi.log" ] && cp "$WORK/logs/nvidia_smi.log" "$WORK/nvidia-smi.txt"
else
  record nvidia_smi skip 0 0 "no nvidia-smi on PATH"
fi
run_step preflight 60 "$PY" bench/gpu_check/preflight.py "$WORK/preflight.json"

# 1. the probe suite, one rank: nccl on the GPU (gloo with --cpu)
run_step probes_1rank 90 "${TORCHRUN[@]}" --nproc_per_node 1 probes/run_all.py \
  --out "$WORK/probes_1rank" --backend "$NCCL" "${PROBE_ARGS[@]}"
# 2. two ranks on the one GPU: nccl refuses two ranks on one device, so gloo. The probe
#    harness keeps gloo's tensors on the CPU by design; gloo on CUDA tensors is checked by
#    selftest_gloo_2rank and the traced jobs b-d below.
run_step probes_gloo_2rank 90 "${TORCHRUN[@]}" --nproc_per_node 2 probes/run_all.py \
  --out "$WORK/probes_gloo_2rank" --backend gloo "${PROBE_ARGS[@]}"
run_step selftest_gloo_2rank 45 "${TORCHRUN[@]}" --nproc_per_node 2 "$TINY" --selftest \
  --backend gloo --device "$DEV" --summary "$WORK/selftest_gloo_2rank"

# 3. tiny traced jobs
traced trace_a_1rank_bf16 1 --backend "$NCCL" --device "$DEV" --amp bf16 --clip after-unscale
traced trace_b_fp16_scaler_ok 2 --backend gloo --device "$DEV" --amp fp16 --scaler \
  --clip after-unscale
traced trace_c_clip_before_unscale 2 --backend gloo --device "$DEV" --amp fp16 --scaler \
  --clip before-unscale
traced trace_d_no_sampler 2 --backend gloo --device "$DEV" --amp none --clip after-unscale \
  --no-sampler
traced trace_e_rank0_load 2 --backend gloo --device "$DEV" --amp fp16 --scaler \
  --clip after-unscale --rank0-load 10

say "all steps done in ${SECONDS}s"
exit 0
