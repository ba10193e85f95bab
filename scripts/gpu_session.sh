#!/usr/bin/env bash
# A session on one GPU, in one go (about 5 minutes on an H200 with the runner check left out): the simulator's
# compute terms (gpu_compute_check.py), the GPU tests (nccl, CUDA memory statistics), two real runs of the
# runner on cuda/nccl (the ~1.3B GPT at bf16 and tf32) and `parbench validate` of them on the h200-sxm
# preset; with --runner-check also scripts/gpu_check.py (every strategy, the runner's clock, torchrun: up
# to 8 more minutes). Usage: scripts/gpu_session.sh OUT_DIR [--runner-check]
# OUT_DIR receives gpu_check.json, log.txt, runs.tar (the runs' records and traces) and, with
# --runner-check, runner_check.json.
set -u
out=${1:?usage: scripts/gpu_session.sh OUT_DIR [--runner-check]}
mkdir -p "$out"
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
runs=$(mktemp -d)
{
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv
  $py -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'
  echo "== gpu_compute_check"
  timeout 200 $py scripts/gpu_compute_check.py --out "$out/gpu_check.json" >/dev/null; echo "rc=$?"
  echo "== GPU tests"
  timeout 150 $py -m pytest -q -p no:cacheprovider tests/distributed/test_gpu.py tests/unit/test_doctor.py \
    tests/unit/test_gpu_readiness.py; echo "rc=$?"
  echo "== runs on cuda/nccl: the 1.3B GPT, batch 4, bf16 autocast and tf32"
  for precision in bf16 tf32; do
    timeout 120 $py -m parbench run --strategy single --world-size 1 --backend nccl --device cuda \
      --precision $precision --workload transformer --layers 24 --hidden 2048 --heads 16 --seq-len 2048 \
      --vocab-size 51200 --global-batch-size 4 --steps 10 --results-dir "$runs"; echo "rc=$?"
  done
  echo "== the simulator on those runs (h200-sxm preset)"
  timeout 40 $py -m parbench validate --results-dir "$runs" --cluster h200-sxm; echo "rc=$?"
  timeout 30 $py -m parbench doctor --device cuda --backend nccl --world-size 1; echo "rc=$?"
  if [ "${2:-}" = --runner-check ]; then
    echo "== scripts/gpu_check.py"
    timeout 480 $py scripts/gpu_check.py --out "$out/runner_check.json"; echo "rc=$?"
  fi
} >"$out/log.txt" 2>&1
cat "$out/log.txt"
tar -C "$runs" -cf "$out/runs.tar" .
