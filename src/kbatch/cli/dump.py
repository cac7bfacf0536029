"""`kbatch dump`: segment, index and snapshot files printed as kafka-dump-log prints them."""

import contextlib
import os
import sys
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING

from .. import _fs
from .. import _wire as W
from ._common import UsageProblem, flags, progress_bar, run

if TYPE_CHECKING:
    import typer


def cmd_dump(files: Sequence[str], *, print_data_log: bool = False, deep_iteration: bool = False,
             index_sanity_check: bool = False, verify_index_only: bool = False, skip_record_metadata: bool = False,
             max_bytes: int = W.INT32_MAX, max_message_size: int = 5 * 1024 * 1024, decoder: str | None = None,
             as_json: bool = False, quiet: bool = False, out: IO[str] | None = None,
             err: IO[str] | None = None) -> int:
    from .dump_log import DumpOptions, Dumper

    out = out or sys.stdout
    err = err or sys.stderr
    if not files:
        raise UsageProblem("give at least one file to dump")
    for f in files:  # a file that is not there is the caller's mistake: said before anything is dumped
        if not _fs.exists(f):
            raise UsageProblem(f"{f}: no such file or directory")
    opts = DumpOptions(print_data_log=print_data_log, deep_iteration=deep_iteration,
                       index_sanity_check=index_sanity_check, verify_index_only=verify_index_only,
                       skip_record_metadata=skip_record_metadata, max_bytes=max_bytes,
                       max_message_size=max_message_size, json=as_json, decoder=decoder)
    total = 0
    for f in files:
        if f.endswith((".log", ".checkpoint")):
            with contextlib.suppress(OSError):
                total += min(os.path.getsize(f), max_bytes)
    with progress_bar(total, "dump", quiet) as advance:
        result = Dumper(opts, out, err, advance).dump(files)
    return result.exit_code


def register(app: "typer.Typer") -> None:
    from typing import Annotated, List, Optional

    import typer

    quiet_flag, json_flag = flags()

    @app.command(help="Print segment, index, snapshot and checkpoint files as kafka-dump-log --files does: .log, "
                      ".index, .timeindex, .txnindex, producer .snapshot, KRaft .checkpoint, leader-epoch-checkpoint, "
                      "partition.metadata and the log directory's offset checkpoints.")
    def dump(
        files: Annotated[Optional[List[str]], typer.Argument(help="Files to dump.", show_default=False)] = None,
        files_csv: Annotated[Optional[str], typer.Option("--files", help="Comma-separated files (kafka-dump-log style).")] = None,
        print_data_log: Annotated[bool, typer.Option("--print-data-log", help="Print keys and values (implies --deep-iteration).")] = False,
        deep_iteration: Annotated[bool, typer.Option("--deep-iteration", help="Print every record, not only batches.")] = False,
        index_sanity_check: Annotated[bool, typer.Option("--index-sanity-check", help="Only run the broker's startup sanity check on index files.")] = False,
        verify_index_only: Annotated[bool, typer.Option("--verify-index-only", help="Check index entries against the log without printing them.")] = False,
        skip_record_metadata: Annotated[bool, typer.Option("--skip-record-metadata", help="Leave out record metadata in deep iteration.")] = False,
        max_bytes: Annotated[int, typer.Option("--max-bytes", min=0, help="Read at most this many bytes of each .log file.")] = W.INT32_MAX,
        max_message_size: Annotated[int, typer.Option("--max-message-size", min=1, help="Largest batch read when checking .index entries.")] = 5 * 1024 * 1024,
        offsets_decoder: Annotated[bool, typer.Option("--offsets-decoder", help="Decode records as __consumer_offsets keys and values (group metadata, committed offsets); implies --print-data-log.")] = False,
        transaction_log_decoder: Annotated[bool, typer.Option("--transaction-log-decoder", help="Decode records as __transaction_state transaction metadata; implies --print-data-log.")] = False,
        cluster_metadata_decoder: Annotated[bool, typer.Option("--cluster-metadata-decoder", help="Decode records as KRaft cluster metadata records; implies --print-data-log.")] = False,
        as_json: Annotated[bool, json_flag] = False,
        quiet: Annotated[bool, quiet_flag] = False,
    ) -> None:
        chosen = [d for d, on in (("offsets", offsets_decoder), ("transaction-log", transaction_log_decoder),
                                  ("cluster-metadata", cluster_metadata_decoder)) if on]
        if len(chosen) > 1:
            raise typer.BadParameter("give at most one of --offsets-decoder, --transaction-log-decoder, "
                                     "--cluster-metadata-decoder")
        names = list(files or [])
        if files_csv:
            names += [f.strip() for f in files_csv.split(",") if f.strip()]
        run(cmd_dump, names, print_data_log=print_data_log, deep_iteration=deep_iteration,
            index_sanity_check=index_sanity_check, verify_index_only=verify_index_only,
            skip_record_metadata=skip_record_metadata, max_bytes=max_bytes, max_message_size=max_message_size,
            decoder=chosen[0] if chosen else None, as_json=as_json, quiet=quiet)
