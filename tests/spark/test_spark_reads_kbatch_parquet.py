"""Spark's own Parquet reader on the files kbatch writes (kbatch.tables.writer_options: dictionaries
where few values repeat, DELTA_BINARY_PACKED offsets, timestamps and ids): a typed `kbatch export
--format parquet` and a typed Delta table's data files read by `spark.read.parquet` give the rows
pyarrow reads, and a filter on offset (pushed down to the row groups' statistics) the right rows."""
from __future__ import annotations

import datetime as dt
import glob
import os

import pytest

import kbatch

pytestmark = pytest.mark.spark

pytest.importorskip("fastavro")
pq = pytest.importorskip("pyarrow.parquet")

from support.typed_orders import orders_log  # noqa: E402


def plain(x):
    """Spark's Row values and pyarrow's as one shape (Row -> dict, bytearray -> bytes, datetimes in UTC)."""
    if hasattr(x, "asDict"):
        x = x.asDict(recursive=True)
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, list):
        return [plain(v) for v in x]
    if isinstance(x, bytearray):
        return bytes(x)
    if isinstance(x, dt.datetime):
        return x.astimezone(dt.timezone.utc) if x.tzinfo else x.replace(tzinfo=dt.timezone.utc)
    return x


def test_spark_reads_kbatch_typed_parquet_and_delta_files_as_pyarrow_does(spark_session, tmp_path):
    from kbatch.cli.export import cmd_export

    logs, sr = orders_log(str(tmp_path), 1500)
    assert cmd_export(logs, to=str(tmp_path / "pq") + "/", fmt="parquet", quiet=True, out=open(os.devnull, "w"),
                      serdes=["value=avro"], schemas=sr) == 0
    kbatch.export_table(logs, str(tmp_path / "delta"), format="delta", value_schema="avro", schemas=sr)
    files = sorted(glob.glob(str(tmp_path / "pq" / "**" / "*.parquet"), recursive=True))
    files += sorted(glob.glob(str(tmp_path / "delta" / "**" / "*.parquet"), recursive=True))
    assert len(files) == 2
    for f in files:
        encodings = {c.path_in_schema: c.encodings for c in (pq.ParquetFile(f).metadata.row_group(0).column(i)
                     for i in range(pq.ParquetFile(f).metadata.num_columns))}
        assert "DELTA_BINARY_PACKED" in encodings["offset"] and "RLE_DICTIONARY" in encodings["value.status"]
        got = sorted((plain(r) for r in spark_session.read.parquet(f).collect()), key=lambda r: r["offset"])
        want = sorted((plain(r) for r in pq.read_table(f).to_pylist()), key=lambda r: r["offset"])
        assert len(got) == 1500 and got == want, f
        picked = spark_session.read.parquet(f).filter("offset >= 700 AND offset < 710").collect()
        assert sorted(r["value"]["id"] for r in picked) == list(range(700, 710))
