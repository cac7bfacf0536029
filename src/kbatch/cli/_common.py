"""What every `kbatch` command shares: exit codes, usage problems, progress bars, times, the
partition and segment paths a command names, JSON lines, and the typer glue (`run`, `options`)."""

import contextlib
import datetime as _dt
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from typing import IO, Any, NoReturn

from .. import _wire as W
from ..errors import KBatchError, MissingDependencyError

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2

# progress bars appear for work over this many bytes, on stderr, when stderr is a terminal
PROGRESS_MIN_BYTES = 4 * 1024 * 1024

_SEGMENT_NAME = re.compile(r"^\d{20}\.log$")
# optional packages a command may need -> the kafka-kbatch extra that installs them
OPTIONAL_DEPENDENCIES = {"pyarrow": "arrow", "pyspark": "spark"}
INSTALL_HINT = "pip install typer rich (kafka-kbatch's 'cli' extra)"


class UsageProblem(Exception):
    """A bad argument or an unreadable path: reported on stderr, exit code 2."""


# ------------------------------------------------------------------------------------ shared helpers
def stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


@contextlib.contextmanager
def progress_bar(total_bytes: int, label: str, quiet: bool = False) -> Iterator[Callable[[int], object]]:
    """Yield `advance(n_bytes)`; draws a rich progress bar on stderr only when the work is over
    PROGRESS_MIN_BYTES, stderr is a terminal and not --quiet. Otherwise advance does nothing."""
    if quiet or total_bytes < PROGRESS_MIN_BYTES or not stderr_is_terminal():
        yield lambda n: None
        return
    from rich.console import Console
    from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn,
                               TransferSpeedColumn)

    with Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                  TimeRemainingColumn(), console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=total_bytes)
        yield lambda n: bar.advance(task, n)


def parse_time(text: str) -> int:
    """A timestamp in ms: an integer (epoch ms, negative allowed) or an ISO-8601 date/time
    ("2024-05-01T09:00:00Z", "2024-05-01T11:00:00+02:00", "2024-05-01"; no zone means UTC)."""
    s = text.strip()
    if re.fullmatch(r"[+-]?\d+", s):
        v = int(s)
        if not W.INT64_MIN <= v <= W.INT64_MAX:
            raise UsageProblem(f"timestamp {text!r} does not fit in 64 bits")
        return v
    iso = s[:-1] + "+00:00" if s.endswith(("Z", "z")) else s
    try:
        t = _dt.datetime.fromisoformat(iso)
    except ValueError:
        raise UsageProblem(f"cannot read {text!r} as a time: give epoch milliseconds (e.g. 1714554000000) "
                           f"or ISO-8601 (e.g. 2024-05-01T09:00:00Z)") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    delta = t - _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def format_time(ms: int | None) -> str:
    """ISO-8601 UTC with milliseconds, or "-" for None; values outside datetime's range print raw."""
    if ms is None:
        return "-"
    try:
        t = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc) + _dt.timedelta(milliseconds=ms)
    except OverflowError:
        return str(ms)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def partition_dirs(path: str | os.PathLike[str]) -> list[str]:
    """The partition directories PATH names: itself when it holds segments (or is a partition
    directory name), else its subdirectories that hold segments (a broker's log directory)."""
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise UsageProblem(f"{path}: not a directory")
    names = os.listdir(path)
    if any(_SEGMENT_NAME.match(n) for n in names):
        return [path]
    subs = []
    for n in sorted(names):
        p = os.path.join(path, n)
        if os.path.isdir(p) and any(_SEGMENT_NAME.match(m) for m in os.listdir(p)):
            subs.append(p)
    if not subs:
        raise UsageProblem(f"{path}: no segments (<20 digits>.log) here or in its subdirectories")
    return subs


def segment_files(directory: str) -> list[str]:
    return sorted(os.path.join(directory, n) for n in os.listdir(directory) if _SEGMENT_NAME.match(n))


def resolve_segments(path: str | os.PathLike[str]) -> list[tuple[str, list[str]]]:
    """[(partition dir, [segment .log paths])] for a segment file, a partition dir or a log dir."""
    path = os.fspath(path)
    if os.path.isfile(path):
        if not path.endswith(".log"):
            raise UsageProblem(f"{path}: not a segment (.log) file")
        return [(os.path.dirname(os.path.abspath(path)), [path])]
    if not os.path.exists(path):
        raise UsageProblem(f"{path}: no such file or directory")
    return [(d, segment_files(d)) for d in partition_dirs(path)]


def api(name: str) -> Any:
    """A kbatch library name the command builds on (kbatch.Log, kbatch.compact, ...)."""
    import kbatch

    try:
        return getattr(kbatch, name)
    except (ImportError, AttributeError) as e:
        raise UsageProblem(f"this command needs kbatch.{name}, which this installation lacks ({e})") from None


def emit(out: IO[str], obj: object) -> None:
    out.write(json.dumps(obj, separators=(", ", ": ")) + "\n")



# ------------------------------------------------------------------------------------ typer glue
def run(fn: Callable[..., int], *args: Any, **kwargs: Any) -> NoReturn:
    """Call a command function and leave with its exit code: usage problems and unreadable paths
    exit 2, kbatch errors exit 1, each said once on stderr. A missing optional dependency (pyarrow
    for export/import) is said with the pip command and exits 2, as a missing typer does."""
    import typer

    try:
        code = fn(*args, **kwargs)
    except MissingDependencyError as e:
        typer.echo(f"kbatch: {e}", err=True)
        raise typer.Exit(EXIT_USAGE)
    except ModuleNotFoundError as e:
        top = (e.name or "").split(".")[0]
        if top not in OPTIONAL_DEPENDENCIES:
            raise
        missing = MissingDependencyError(f"this command ({fn.__name__.removeprefix('cmd_')})", top,
                                         OPTIONAL_DEPENDENCIES[top])
        typer.echo(f"kbatch: {missing}", err=True)
        raise typer.Exit(EXIT_USAGE)
    except BrokenPipeError:  # `kbatch dump ... | head`: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise typer.Exit(EXIT_PROBLEMS)
    except UsageProblem as e:
        typer.echo(f"kbatch: {e}", err=True)
        raise typer.Exit(EXIT_USAGE)
    except OSError as e:
        typer.echo(f"kbatch: {e.filename + ': ' if e.filename else ''}{e.strerror or e}", err=True)
        raise typer.Exit(EXIT_USAGE)
    except KBatchError as e:
        typer.echo(f"kbatch: {e}", err=True)
        raise typer.Exit(EXIT_PROBLEMS)
    raise typer.Exit(code)


def time_value(text: str | None) -> int | None:
    """A --time/--now option's value as epoch ms (None stays None); a bad one is typer's usage error."""
    import typer

    if text is None:
        return None
    try:
        return parse_time(text)
    except UsageProblem as e:
        raise typer.BadParameter(str(e)) from None


def options() -> tuple[Any, Any]:
    """The options every command takes: (Quiet, Json) as typer annotations."""
    from typing import Annotated

    import typer

    quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars and no summary when all is well.")]
    as_json = Annotated[bool, typer.Option("--json", help="One JSON object per line.")]
    return quiet, as_json
