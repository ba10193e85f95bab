#!/usr/bin/env bash
# Every single-GPU check, in one go (about four minutes on an H200): the simulator's compute terms
# (gpu_compute_check.py), the GPU tests (nccl, CUDA memory statistics), two real runs of the runner on
# cuda/nccl and the simulator's prediction of them. Usage: scripts/gpu_checks.sh OUT_DIR
# OUT_DIR receives gpu_check.json, log.txt and runs.tar (the runs' records and traces).
set -u
out=${1:?usage: scripts/gpu_checks.sh OUT_DIR}
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
} >"$out/log.txt" 2>&1
cat "$out/log.txt"
tar -C "$runs" -cf "$out/runs.tar" .
