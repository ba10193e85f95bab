"""``parbench dashboard``: serve the Streamlit dashboard over a results directory on 127.0.0.1."""

from __future__ import annotations

import argparse
import importlib.util
import os
import socket
import sys
from pathlib import Path

from parbench.config import ConfigError


def app_path() -> Path | None:
    """``dashboard/app.py`` of the installed ``dashboard`` package (it ships beside ``parbench``)."""
    spec = importlib.util.find_spec("dashboard")
    if spec is None or spec.origin is None:
        return None
    app = Path(spec.origin).parent / "app.py"
    return app if app.is_file() else None


def add_parser(sub) -> None:
    p = sub.add_parser("dashboard", help="serve the dashboard on 127.0.0.1", description=__doc__)
    p.add_argument("--results-dir", default="results", help="results directory the dashboard opens")
    p.add_argument("--port", type=int, default=0, help="default: a free port")
    p.set_defaults(handler=handle)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_port_free(port: int) -> None:
    """ConfigError (exit 2) when 127.0.0.1:port is taken: said here, not in streamlit's log after it started."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError as exc:
            raise ConfigError(f"--port {port}: 127.0.0.1:{port} cannot be used ({exc.strerror}); leave --port out "
                              "for a free one") from None


def streamlit_command(app: Path, port: int, results_dir: str) -> list[str]:
    return [sys.executable, "-m", "streamlit", "run", str(app), "--server.address", "127.0.0.1",
            "--server.port", str(port), "--server.headless", "true", "--browser.gatherUsageStats", "false",
            "--", "--results-dir", results_dir]


def handle(a: argparse.Namespace) -> int:
    app = app_path()
    if app is None:
        print("parbench dashboard: the dashboard package is not installed (it ships with parbench: reinstall it)",
              file=sys.stderr)
        return 2
    if not 0 <= a.port <= 65535:
        raise ConfigError(f"--port {a.port} is not a TCP port (1-65535, or 0 for a free one)")
    if a.port:
        check_port_free(a.port)
    port = a.port or free_port()
    results_dir = str(Path(a.results_dir).resolve())
    print(f"parbench dashboard: http://127.0.0.1:{port}  (results: {results_dir}; Ctrl-C stops)", flush=True)
    env = dict(os.environ, PARBENCH_RESULTS_DIR=results_dir)
    # exec, not a child process: a signal to this pid (Ctrl-C, terminate) reaches streamlit itself
    cmd = streamlit_command(app, port, results_dir)
    os.execve(cmd[0], cmd, env)
    return 0  # not reached
