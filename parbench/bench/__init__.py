"""parbench measuring itself: step benchmarks, golden figures, the overhead gate and run history.

    harness.py   runs each strategy's step in real rank processes: the runner's own measure(),
                 then interleaved blocks of bare / runner-timed / all-meters-on steps
    golden.py    deterministic figures (bytes, parameter counts) vs the committed golden file
    overhead.py  instrumented / bare step-time ratio and its bound (pure, no torch)
    history.py   saved pytest-benchmark runs (results/benchmarks/), torch-free
    gate.py      the CI gates, in order: golden, overhead, timing vs a same-machine baseline
"""
