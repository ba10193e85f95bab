"""IBM's fms-fsdp benchmark rows, predicted: an FSDP source no constant was fitted to, half of it checkpointed.

    python scripts/fms_fsdp_check.py

The table is the fms-fsdp README's (github.com/foundation-model-stack/fms-fsdp): Llama 2 7B, 13B, 34B and 70B
at 4,096 tokens on 128 A100 80GB, PyTorch FSDP1 (HSDP within a node for 7B and 13B), SDPA's FlashAttention-2,
eager torch, bf16, per-GPU batch as printed, activation checkpointing as printed through torch's
non-reentrant ``checkpoint_wrapper`` (``fms_fsdp/policies/ac_handler.py``) on the torch 2.2+ the README asks
for: the replay stops early (``Layout.recompute_early_stop``). The 34B is fms's Llama 2 34B shape (48
layers, 8192 wide, 64 heads, 8 KV heads, MLP 22016, the 32,000-token vocabulary). The README does not state
the cluster's network (IBM's Vela, RoCE), so each row is printed at 12.5 and 25 GB/s per GPU between nodes;
the checkpointed 34B and 70B, compute-bound, move by about one point between them.
"""

from __future__ import annotations

from dataclasses import replace

from parbench.sim.hardware import PRESETS
from parbench.sim.model import architecture_spec
from parbench.sim.models import MODELS, _llama
from parbench.sim.predict import predict
from parbench.sim.published_memory import _fsdp

ROWS = (("llama2-7b", MODELS["llama2-7b"].arch, True, 2, "none", 3760),
        ("llama2-13b", MODELS["llama2-13b"].arch, True, 1, "none", 1700),
        ("llama2-34b", _llama("llama2-34b", 48, 8192, 64, 8, 22016, 32000, 4096), False, 8, "full", 772),
        ("llama2-70b", MODELS["llama2-70b"].arch, False, 6, "full", 380))
"""(name, architecture, HSDP, per-GPU batch, recomputation, published tokens/s per GPU)."""


def main() -> None:
    a100 = PRESETS["a100-80gb"]
    print(f"{'model':<11} {'AC':<4} {'tokens/s/GPU':>12} " + " ".join(f"{f'pred @ {g} GB/s':>17}" for g in (12.5, 25)))
    for name, arch, hsdp, batch, recompute, published in ROWS:
        layout = _fsdp(kernel="flash2", gpus=128, local=batch, recompute=recompute, fused=False, fsdp2=False,
                       early_stop=True)
        if hsdp:
            layout = replace(layout, replicate=16)
        cells = []
        for gbs in (12.5, 25):
            device = replace(a100, inter=replace(a100.inter, bandwidth_bytes_per_s=0.9 * gbs * 1e9))
            tps = arch.seq_len * batch / predict(architecture_spec(arch), layout, device).step_time_s
            cells.append(f"{tps:8.0f} ({(tps / published - 1) * 100:+5.1f}%)")
        print(f"{name:<11} {recompute:<4} {published:>12} " + " ".join(f"{c:>17}" for c in cells))


if __name__ == "__main__":
    main()
