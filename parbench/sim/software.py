"""Which training software a published run ran: the ``parbench simulate --software`` and the flags adjusting it
that give a layout every one of its software-set fields. A published row's error holds for the software it ran;
``parbench.sim.accuracy`` names it beside each nearby row, ``parbench.sim.reproduce`` writes it into the row's
command line."""

from __future__ import annotations

from dataclasses import replace

from parbench.sim.layout import Layout


def _software_fields() -> tuple[str, ...]:
    from parbench.sim.layout import PRECISIONS, SOFTWARE

    flags = SOFTWARE["torch"].layout_flags(pp=1, zero=0, precision=PRECISIONS["bf16"])
    return (*flags, *SOFTWARE["torch"].tp_flags(1), "sp_saves_gathered_input", "precision")


SOFTWARE_FIELDS = _software_fields()
"""The layout fields a training software sets (``Framework.layout_flags``, ``tp_flags`` and the precision it
reduces gradients in): two runs of one mesh differ in these when they ran different software."""

SOFTWARE_VARIANTS = ((), ("--unfused-elementwise",), ("--reentrant-checkpoint",), ("--sequence-parallel",),
                     ("--unfused-elementwise", "--reentrant-checkpoint"), ("--overlap-param-gather",),
                     ("--no-compiled-loss",))
"""``parbench simulate`` flags that change a software's own flags, tried after the software alone."""


def _software_flags(name: str, variant: tuple[str, ...], layout: Layout) -> dict:
    """The software-set fields ``--software name`` with ``variant``'s flags gives a layout of this mesh, schedule and
    precision (as ``parbench.commands.simulate._framework`` applies those flags)."""

    from parbench.sim.layout import SOFTWARE

    base = SOFTWARE[name]
    sw = replace(base, fused_elementwise=base.fused_elementwise and "--unfused-elementwise" not in variant,
                 compiled_loss=(base.compiled_loss and "--unfused-elementwise" not in variant
                                and "--no-compiled-loss" not in variant),
                 recompute_early_stop=base.recompute_early_stop and "--reentrant-checkpoint" not in variant,
                 overlap_param_gather=base.overlap_param_gather or "--overlap-param-gather" in variant)
    p = layout.precision
    # bf16 and FP8 train with float32 gradient accumulation (PRECISIONS) until a software reduces them in bf16
    trained = replace(p, fp32_grad_accumulation=True) if p.param_bytes == 2 and not p.loss_scaling else p
    precision = sw.precision_for(trained)
    tp = sw.tp_flags(layout.tp)
    if "--sequence-parallel" in variant:
        tp["sequence_parallel"] = True
    flags = sw.layout_flags(pp=layout.pp, zero=layout.zero, precision=precision, schedule=layout.schedule)
    if layout.attention != "flash":  # eager attention runs no flash kernel, whatever the software's own
        flags["attention_kernel"] = ""
    return {**flags, **tp, "sp_saves_gathered_input": sw.dtensor_sequence_parallel and tp["sequence_parallel"],
            "precision": precision}


def software_of(layout: Layout, moe: bool = False) -> str:
    """The ``parbench simulate`` flags (``--software`` and ``SOFTWARE_VARIANTS``' adjustments, the fewest first)
    that give ``layout`` every one of its software-set fields (how a MoE block weights its experts only where
    ``moe``) but its FP8 recipe and whether it gathers FP8 weights, which ``--fp8-scaling`` and
    ``--[no-]fp8-all-gather`` set on any software; '' where none does (a run whose flags were set one by one)."""
    from parbench.sim.layout import SOFTWARE

    for variant in SOFTWARE_VARIANTS:
        for name in SOFTWARE:
            flags = _software_flags(name, variant, layout)
            if all(getattr(layout, k) == v for k, v in flags.items()
                   if (moe or k != "moe_saved_outputs") and k not in ("fp8_scaling", "fp8_all_gather")):
                return " ".join(("--software", name, *variant))
    return ""
