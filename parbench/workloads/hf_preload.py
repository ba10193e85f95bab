"""Imported by the forkserver before it forks the ranks of a sweep or run with a Hugging Face workload
(``parbench.workloads.preload_modules``): transformers' model code is then imported once, by the server,
not once per rank and per run (~3 s each on the 2-core machine). Any failure here is left to the ranks,
which import transformers themselves and report it as their run's error."""

import contextlib

from parbench.workloads import hf

with contextlib.suppress(Exception):
    hf.import_models()
