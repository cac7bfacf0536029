"""CSV for `kbatch export --format csv`: one row per record, a header row with decode_columns'
column names. Cells are what the JSON lines export writes (cli/_jsonl.py): keys and values base64
(or, with --binary text, UTF-8 text), timestamps epoch milliseconds; a cell that is a list or an
object (headers, typed -s values) holds its JSON text; null is an empty cell (RFC 4180 quoting, by
Python's csv module)."""
import csv
import json
from typing import IO, Any

import pyarrow as pa

from ._jsonl import rows_of


def _cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, (list, dict)):
        return json.dumps(v, separators=(",", ":"), ensure_ascii=False)
    if isinstance(v, bool):
        return "true" if v else "false"
    return v


class CsvWriter:
    """Rows of decode_columns record batches onto a text file opened with newline=""."""

    def __init__(self, f: IO[str], binary: str) -> None:
        self.w = csv.writer(f, lineterminator="\n")
        self.binary = binary
        self.header: list[str] | None = None

    def write(self, rb: pa.RecordBatch) -> None:
        if self.header is None:
            self.header = list(rb.schema.names)
            self.w.writerow(self.header)
        for row in rows_of(rb, self.binary):
            self.w.writerow([_cell(row.get(name)) for name in self.header])
