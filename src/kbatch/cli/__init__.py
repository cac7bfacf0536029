"""The `kbatch` command line.

One module per command (`cli/verify.py`, ...), each with a plain function (`cmd_verify`, ...) that
takes parsed values, writes to the given streams and returns the exit code, and a `register(app)`
that declares its typer command; typer only parses the command line (`make_app`), and rich only
draws progress bars. Exit codes (docs/cli.md):

    0  everything read and nothing wrong
    1  the command ran and found problems (corrupt batches, bad indexes, invalid timestamps)
    2  usage error, or a file/directory that cannot be read or written

except `kbatch grep`, which exits as grep does: 0 a match, 1 none, 2 usage, 3 bytes it could not read.

typer and rich come with the `cli` extra; without them `main()` says so and exits 2, except for
`kbatch --version` (`-V`), which needs neither.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import Any

from ._common import (EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, INSTALL_HINT, PROGRESS_MIN_BYTES, UsageProblem,
                      format_time, parse_time, partition_dirs, progress_bar, resolve_segments)
from .audit import cmd_audit
from .cat import cmd_cat
from .compact import cmd_compact
from .dump import cmd_dump
from .export import cmd_export
from .grep import cmd_grep
from .import_ import cmd_import
from .offsets import cmd_offsets
from .reindex import cmd_reindex
from .report import cmd_report
from .serve import cmd_serve
from .stats import cmd_stats
from .validate import cmd_validate, timestamp_report
from .verify import cmd_verify

# the command modules, in the order `kbatch --help` lists them
COMMANDS = ("dump", "verify", "reindex", "offsets", "validate", "compact", "export", "import_", "serve", "cat",
            "grep", "stats", "audit", "report")


def version_line() -> str:
    """What `kbatch --version` prints: the version, and which kernel backend is live."""
    from .. import BACKEND, __version__

    return f"kbatch {__version__} (backend: {BACKEND}, Python {sys.version.split()[0]})"


#: help written to a pipe or a file: as wide as its longest line (click wraps at this width)
PLAIN_HELP_WIDTH = 10_000


def plain_help() -> bool:
    """Help as plain text, unwrapped: stdout is not a terminal and no COLUMNS / TERMINAL_WIDTH says
    a width (rich would otherwise draw its boxes 80 columns wide and cut every option's help)."""
    import os

    if os.environ.get("COLUMNS") or os.environ.get("TERMINAL_WIDTH"):
        return False
    try:
        return not sys.stdout.isatty()
    except (AttributeError, ValueError):
        return True


def make_app() -> Any:
    """The typer application (imports typer; see main() for what happens without it)."""
    import rich  # noqa: F401  (progress bars; part of the cli extra)
    import typer

    settings: dict[str, Any] = {"help_option_names": ["-h", "--help"]}
    plain = plain_help()
    if plain:  # click's plain help, lines never wrapped: `kbatch export --help | grep topic` finds whole lines
        settings.update(terminal_width=PLAIN_HELP_WIDTH, max_content_width=PLAIN_HELP_WIDTH)
    app = typer.Typer(name="kbatch", add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                      help="Inspect, check and repair Apache Kafka log segments. "
                           "Exit codes: 0 ok, 1 problems found, 2 usage or I/O error.",
                      context_settings=settings, rich_markup_mode=None if plain else "rich")

    def show_version(value: bool) -> None:
        if value:
            typer.echo(version_line())
            raise typer.Exit(EXIT_OK)

    @app.callback()
    def _root(version: bool = typer.Option(False, "--version", "-V", callback=show_version, is_eager=True,
                                           help="Print the kbatch version and backend, then exit.")) -> None:
        """Inspect, check and repair Apache Kafka log segments.
        Exit codes: 0 ok, 1 problems found, 2 usage or I/O error."""

    for name in COMMANDS:
        importlib.import_module(f"{__name__}.{name}").register(app)
    return app


def _environment_problem() -> str | None:
    """What is wrong with a KBATCH_* setting every command reads (a usage error, before any work),
    or None."""
    from ..errors import KBatchError
    from ..log.summary_cache import max_cache_bytes

    try:
        max_cache_bytes()
    except KBatchError as e:
        return str(e)
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Console-script entry point (`kbatch = "kbatch.cli:main"`)."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args in (["--version"], ["-V"]):  # answered without typer, so it works without the cli extra
        print(version_line())
        return EXIT_OK
    try:
        app = make_app()
    except ImportError as e:
        missing = getattr(e, "name", None) or str(e)
        sys.stderr.write(f"kbatch: the command line needs typer and rich ({missing} is missing): {INSTALL_HINT}\n")
        return EXIT_USAGE
    problem = _environment_problem()
    if problem:
        sys.stderr.write(f"kbatch: {problem}\n")
        return EXIT_USAGE
    try:
        app(args=args, prog_name="kbatch")
    except SystemExit as e:
        code = e.code
        if code is None:
            return EXIT_OK
        if isinstance(code, int):
            return code
        sys.stderr.write(f"{code}\n")
        return EXIT_USAGE
    return EXIT_OK


__all__ = ["main", "make_app", "COMMANDS", "EXIT_OK", "EXIT_PROBLEMS", "EXIT_USAGE", "PROGRESS_MIN_BYTES",
           "UsageProblem", "version_line", "parse_time", "format_time", "progress_bar", "partition_dirs", "resolve_segments",
           "cmd_dump", "cmd_verify", "cmd_reindex", "cmd_offsets", "cmd_validate", "cmd_compact", "cmd_export",
           "cmd_import", "cmd_serve", "cmd_cat", "cmd_grep", "cmd_stats", "cmd_audit", "cmd_report",
           "timestamp_report"]
