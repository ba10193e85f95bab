"""A rich progress bar for a sweep: the current run, done/total, elapsed and ETA."""

from __future__ import annotations

import contextlib
from typing import Iterator

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)

from parbench.sweep.execute import ProgressFn


@contextlib.contextmanager
def progress_bar(console: Console, total: int) -> Iterator[ProgressFn]:
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=False) as bar:
        task = bar.add_task("sweep", total=total)

        def on_event(event: str, point, repeat: int, record) -> None:
            if event == "start":
                bar.update(task, description=f"{point.label} r{repeat}")
            elif event == "skip":
                bar.advance(task)
            else:
                bar.advance(task)
                if record["status"] != "ok":
                    console.print(f"[red]{record['status']}[/] {point.label} r{repeat}: "
                                  f"{(record.get('error') or '').strip().splitlines()[0][:200]}")
        yield on_event
        bar.update(task, description="sweep done")
