"""What every `kbatch` command shares: exit codes, usage problems, progress bars, times, the
partition and segment paths a command names, JSON lines, and the typer glue (`run`, `options`)."""

import contextlib
import datetime as _dt
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import IO, TYPE_CHECKING, Any, NoReturn

from .. import _fs
from .. import _wire as W
from ..errors import InvalidConfigurationError, KBatchError, MissingDependencyError

if TYPE_CHECKING:
    from ..log.layout import Partition
    from ..log.segment import SegmentFiles

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2

# progress bars appear for work over this many bytes, on stderr, when stderr is a terminal
PROGRESS_MIN_BYTES = 4 * 1024 * 1024
# ... and once the work has run this long: a command that is done sooner draws nothing
PROGRESS_AFTER_S = 1.0

# optional packages a command may need -> the kafka-kbatch extra that installs them
OPTIONAL_DEPENDENCIES = {"pyarrow": "arrow", "pyspark": "spark", "plotly": "report"}
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
    PROGRESS_MIN_BYTES, stderr is a terminal (never a pipe) and not --quiet, from the first
    advance after PROGRESS_AFTER_S seconds. Otherwise advance does nothing."""
    if quiet or total_bytes < PROGRESS_MIN_BYTES or not stderr_is_terminal():
        yield lambda n: None
        return
    from rich.console import Console
    from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn,
                               TransferSpeedColumn)

    bar = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                   TimeRemainingColumn(), console=Console(stderr=True), transient=True)
    task = bar.add_task(label, total=total_bytes)
    began = time.monotonic()
    shown = False

    def advance(n: int) -> None:
        nonlocal shown
        bar.advance(task, n)
        if not shown and time.monotonic() - began >= PROGRESS_AFTER_S:
            bar.start()
            shown = True

    try:
        yield advance
    finally:
        if shown:
            bar.stop()


def log_bytes(dirs: "list[str]") -> int:
    """The .log bytes of local partition directories (a progress bar's total; remote ones count 0)."""
    total = 0
    for d in dirs:
        if _fs.is_remote(d):
            continue
        try:
            total += sum(e.stat().st_size for e in os.scandir(d) if e.name.endswith(".log") and e.is_file())
        except OSError:
            pass
    return total


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
    """The partition directories PATH names: itself when it holds segments, else the partition
    folders below it that hold segments (a broker's log directory, or a tiered-storage layout's
    root: kbatch.log.layout). PATH may be a URI (s3://..., gs://..., hdfs://...)."""
    from ..log import layout

    path = _path(path)
    if not _fs.isdir(path):
        raise UsageProblem(f"{path}: not a directory")
    parts = layout.find_partitions(path)
    if not parts:
        raise UsageProblem(f"{path}: no segments (<20 digits>.log, or tiered-storage <offset>-<id>.log) here or in "
                           f"its subdirectories")
    return [p.path for p in parts]


def topic_list(topic: "str | Sequence[str] | None") -> list[str] | None:
    """-t / --topic values (repeatable; one string is one topic) -> a list, or None for none."""
    if topic is None:
        return None
    topics = [topic] if isinstance(topic, str) else list(topic)
    return topics or None


def selected_partitions(path: str | os.PathLike[str], topics: "Sequence[str] | None" = None, *,
                        exclude: "Sequence[str] | None" = None, include_internal: bool = False) -> "list[Partition]":
    """The partitions under PATH that a reader takes (kbatch.log.topics: --topic names or globs,
    --exclude-topic globs, internal topics only when named or with --include-internal; PATH as
    one partition is always read)."""
    from ..log.layout import describe
    from ..log.topics import TopicSelection, select_partitions

    selection = TopicSelection.of(topics, exclude=exclude, include_internal=include_internal)
    return select_partitions([describe(d, []) for d in partition_dirs(path)], _path(path), selection)


def _path(path: str | os.PathLike[str]) -> str:
    return path if isinstance(path, str) and _fs.is_remote(path) else os.fspath(path)


def resolve_segments(path: str | os.PathLike[str],
                     problems: list[str] | None = None) -> "list[tuple[str, list[SegmentFiles]]]":
    """[(partition dir, [SegmentFiles])] for a segment file, a partition dir or a log dir, in any
    layout kbatch.log.layout reads, local or remote. `seg.path(".log")` names each segment's .log.
    Tiered copies left out as incomplete go to `problems` (the command reports them and exits
    1), or to stderr when no list is given."""
    from ..log import layout

    path = _path(path)
    if _fs.isfile(path):
        if not path.endswith(".log"):
            raise UsageProblem(f"{path}: not a segment (.log) file")
        return [(_fs.dirname(path), [layout.segment_files_for(path)])]
    if not _fs.exists(path):
        raise UsageProblem(f"{path}: no such file or directory")
    out: list[tuple[str, list[SegmentFiles]]] = []
    for d in partition_dirs(path):
        listing = layout.list_segments(d)
        for p in listing.problems:
            if problems is not None:
                problems.append(p)
            else:
                sys.stderr.write(f"kbatch: {p}\n")
        out.append((d, listing.segments))
    return out


def partition_name(d: str) -> str:
    """A partition directory's name as commands print it (the last path element)."""
    return _fs.basename(d) if _fs.is_remote(d) else os.path.basename(os.path.abspath(d))


def refuse_remote(path: str | os.PathLike[str], what: str) -> None:
    """Write commands work on local directories only."""
    if isinstance(path, str) and _fs.is_remote(path):
        raise UsageProblem(f"{path}: {what} writes, and object storage is read-only for kbatch; copy the partition "
                           f"to a local directory first")


def total_size(parts: "list[tuple[str, list[SegmentFiles]]]") -> int:
    """Bytes of the .log files resolve_segments named (0 for a size that cannot be had)."""
    total = 0
    for _d, segs in parts:
        for f in segs:
            sizes = getattr(f, "sizes", None) or getattr(getattr(f, "inner", None), "sizes", None)
            if sizes and ".log" in sizes:
                total += sizes[".log"][0] or 0
                continue
            with contextlib.suppress(OSError):
                total += _fs.getsize(f.path(".log"))
    return total


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
    except InvalidConfigurationError as e:  # a bad --config name or value: the user's to fix
        typer.echo(f"kbatch: {e}", err=True)
        raise typer.Exit(EXIT_USAGE)
    except KBatchError as e:
        typer.echo(f"kbatch: {e}", err=True)
        raise typer.Exit(EXIT_PROBLEMS)
    except (ValueError, TypeError, OverflowError) as e:
        # a value the library refused that no option check caught: one line, never a traceback
        # (KBATCH_DEBUG=1 shows it, for a bug report)
        if os.environ.get("KBATCH_DEBUG"):
            raise
        typer.echo(f"kbatch: {e}", err=True)
        raise typer.Exit(EXIT_USAGE)
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


def flags() -> tuple[Any, Any]:
    """The options every command takes, as typer.Option objects (quiet, json), for annotations a
    type checker reads too: `quiet: Annotated[bool, quiet_flag] = False`."""
    import typer

    return (typer.Option("--quiet", "-q", help="No progress bars and no summary when all is well."),
            typer.Option("--json", help="One JSON object per line."))


def options() -> tuple[Any, Any]:
    """The options every command takes: (Quiet, Json) as typer annotations."""
    from typing import Annotated

    quiet, as_json = flags()
    return Annotated[bool, quiet], Annotated[bool, as_json]
