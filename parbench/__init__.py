"""parbench: real-process benchmarks and an analytical simulator for distributed-training layouts."""

__version__ = "0.1.0"
