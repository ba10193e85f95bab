"""Analytical cost model: predict communication, memory, time and throughput of a parallel layout at
any scale, torch-free (``calibrate`` alone imports torch, to measure this machine)."""

from parbench.sim.hardware import PRESETS, Cluster, Link, load_cluster
from parbench.sim.layout import PRECISIONS, Layout, Precision, Recompute, layout_from_run
from parbench.sim.model import ModelSpec, model_spec
from parbench.sim.predict import Prediction, predict

__all__ = ["PRESETS", "PRECISIONS", "Cluster", "Layout", "Link", "ModelSpec", "Precision", "Prediction",
           "Recompute", "layout_from_run", "load_cluster", "model_spec", "predict"]
