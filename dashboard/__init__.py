"""The Streamlit dashboard over a results directory (``parbench dashboard``). Torch-free."""
