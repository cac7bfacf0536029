"""Compression levels as Kafka has them (KIP-390: compression.gzip.level, compression.lz4.level,
compression.zstd.level; GzipCompression, Lz4Compression, ZstdCompression, Lz4BlockOutputStream),
and `compression_level` reaching the codec from every writer: BatchBuilder, encode_columns,
LogConfig / LogValidator rebuilds, Log.append_table and the CLI's import.

The defaults are Kafka's: gzip -1 (Deflater's default, zlib level 6), lz4 9 (which Kafka's
Lz4BlockOutputStream runs as lz4-java's *fast* compressor; every other lz4 level runs the
high-compression compressor at that level), zstd 3; snappy has no level."""
import random
import re
import struct
import zlib

import lz4.block
import pyarrow as pa
import pytest
import zstandard

import kbatch
from kbatch import _wire as W
from kbatch.record import compression as C
from kbatch.errors import InvalidConfigurationError

PAYLOAD = b"".join(b"record %d with some repeated text and a key-%d; " % (i, i % 97) for i in range(6000))
NOW = 1_700_000_000_000


def lz4_blocks(frame: bytes):
    """The blocks of a Kafka lz4 frame: (stored uncompressed?, bytes)."""
    assert frame[:7] == bytes.fromhex("04224d18604082")  # Kafka's header: FLG 0x60, BD 0x40, HC 0x82
    pos, out = 7, []
    while True:
        (n,) = struct.unpack_from("<I", frame, pos)
        pos += 4
        if n == 0:
            assert pos == len(frame)  # EndMark, no content checksum
            return out
        size = n & 0x7FFFFFFF
        out.append((bool(n & 0x80000000), frame[pos:pos + size]))
        pos += size


def test_defaults_are_kafkas():
    assert (W.GZIP_LEVELS, W.LZ4_LEVELS, W.ZSTD_LEVELS) == ((1, 9, -1), (1, 17, 9), (-131072, 22, 3))
    assert [C.default_level(c) for c in kbatch.Compression] == [None, -1, None, 9, 3]
    cfg = kbatch.LogConfig()
    assert (cfg.compression_gzip_level, cfg.compression_lz4_level, cfg.compression_zstd_level) == (-1, 9, 3)
    assert kbatch.BatchBuilder(compression=kbatch.Compression.LZ4).compression_level == 9
    assert kbatch.BatchBuilder(compression=kbatch.Compression.SNAPPY).compression_level is None


@pytest.mark.parametrize("level", [None, 9])
def test_lz4_default_level_is_the_fast_compressor(level):
    """Kafka's default lz4 level (9) is lz4's fast compressor (LZ4_compress_default), not HC 9."""
    blocks = lz4_blocks(C.compress(kbatch.Compression.LZ4, PAYLOAD, level=level))
    chunks = [PAYLOAD[i:i + 65536] for i in range(0, len(PAYLOAD), 65536)]
    assert len(blocks) == len(chunks) > 1
    for (raw, block), chunk in zip(blocks, chunks):
        assert not raw and block == lz4.block.compress(chunk, store_size=False)


@pytest.mark.parametrize("level", [1, 2, 3, 10, 17])
def test_other_lz4_levels_are_high_compression_at_that_level(level):
    blocks = lz4_blocks(C.compress(kbatch.Compression.LZ4, PAYLOAD, level=level))
    chunks = [PAYLOAD[i:i + 65536] for i in range(0, len(PAYLOAD), 65536)]
    for (raw, block), chunk in zip(blocks, chunks):
        assert not raw and block == lz4.block.compress(chunk, mode="high_compression", compression=level,
                                                       store_size=False)
    assert C.decompress(kbatch.Compression.LZ4, C.compress(kbatch.Compression.LZ4, PAYLOAD, level=level)) == PAYLOAD


@pytest.mark.parametrize("level", [1, 9, 12])
def test_lz4_incompressible_blocks_are_stored_as_kafka_does(level):
    noise = random.Random(level).randbytes(70000)
    frame = C.compress(kbatch.Compression.LZ4, noise, level=level)
    assert [raw for raw, _ in lz4_blocks(frame)] == [True, True]
    assert C.decompress(kbatch.Compression.LZ4, frame) == noise
    assert C.decompress(kbatch.Compression.LZ4, C.compress(kbatch.Compression.LZ4, b"", level=level)) == b""


def test_gzip_default_is_zlib_level_6_and_levels_reach_zlib():
    def deflate(level):
        c = zlib.compressobj(level, zlib.DEFLATED, -15)
        return c.compress(PAYLOAD) + c.flush()

    for level, zlevel in ((None, 6), (-1, 6), (1, 1), (9, 9)):
        member = C.compress(kbatch.Compression.GZIP, PAYLOAD, level=level)
        assert member[10:-8] == deflate(zlevel)  # RFC 1952: 10-byte header, deflate, CRC32 + size


def test_zstd_default_is_level_3_and_levels_reach_zstd():
    for level, zlevel in ((None, 3), (3, 3), (1, 1), (19, 19), (-7, -7)):
        want = zstandard.ZstdCompressor(level=zlevel, write_content_size=False).compress(PAYLOAD)
        assert C.compress(kbatch.Compression.ZSTD, PAYLOAD, level=level) == want


@pytest.mark.parametrize("codec,level,expected", [
    (kbatch.Compression.LZ4, 0, "in [1, 17]"), (kbatch.Compression.LZ4, 18, "in [1, 17]"),
    (kbatch.Compression.GZIP, 0, "in [1, 9] or -1"), (kbatch.Compression.GZIP, 10, "in [1, 9] or -1"),
    (kbatch.Compression.ZSTD, 23, "in [-131072, 22]"), (kbatch.Compression.ZSTD, -131073, "in [-131072, 22]"),
    (kbatch.Compression.SNAPPY, 1, "no level"), (kbatch.Compression.NONE, 1, "no level")])
def test_levels_out_of_kafkas_range_are_refused(codec, level, expected):
    with pytest.raises(InvalidConfigurationError, match=re.escape(expected)) as e:
        kbatch.BatchBuilder(compression=codec, compression_level=level)
    assert e.value.error_code == 40 and isinstance(e.value, ValueError)
    with pytest.raises(InvalidConfigurationError):
        C.compress(codec, b"x", level=level)
    with pytest.raises(InvalidConfigurationError):
        kbatch.encode_columns(pa.table({"value": [b"v"]}), compression=codec, compression_level=level)


def test_log_config_levels_from_kafka_names_and_their_range():
    cfg = kbatch.LogConfig.from_properties({"compression.type": "zstd", "compression.zstd.level": "19",
                                            "compression.lz4.level": "4", "compression.gzip.level": "1"})
    assert (cfg.compression_zstd_level, cfg.compression_lz4_level, cfg.compression_gzip_level) == (19, 4, 1)
    assert cfg.compression_level == 19
    assert kbatch.LogConfig(compression_type="producer").compression_level is None
    assert kbatch.LogConfig(compression_type="snappy").compression_level is None
    for name, bad in (("compression.lz4.level", "0"), ("compression.gzip.level", "10"),
                      ("compression.zstd.level", "23")):
        with pytest.raises(InvalidConfigurationError, match=f"Invalid value for {name}"):
            kbatch.LogConfig.from_properties({name: bad})


def _records(n=300):
    return [(NOW + i, b"key-%d" % i, b"value %d " % i * 20) for i in range(n)]


def test_a_topic_codec_recompresses_at_the_topic_level(tmp_path):
    """compression.type=zstd with compression.zstd.level=19: the broker's rebuild of a producer's
    uncompressed batch compresses at 19; a "producer" topic rebuilding at the producer codec's
    default (BrokerCompressionType.targetCompression)."""
    data = kbatch.build_batch(_records(), timestamp_extended=False)
    cfg = kbatch.LogConfig(compression_type="zstd", compression_zstd_level=19)
    out, info = cfg.validator().validate_and_assign(data, 0, NOW)
    assert info.rebuilt
    (batch,) = kbatch.iter_batches(out)
    want = kbatch.build_batch(_records(), compression=kbatch.Compression.ZSTD, compression_level=19,
                              timestamp_extended=False)
    assert out == want
    assert batch.records_bytes() == next(kbatch.iter_batches(data)).records_bytes()
    # the validator alone: a level needs a topic codec
    with pytest.raises(InvalidConfigurationError, match="needs a topic codec"):
        kbatch.LogValidator(compression_level=5)


def test_append_table_uses_the_topic_level(tmp_path):
    rows = _records(200)
    tbl = pa.table({"key": [r[1] for r in rows], "value": [r[2] for r in rows],
                    "timestamp": pa.array([r[0] for r in rows], pa.timestamp("ms"))})
    cfg = kbatch.LogConfig(compression_type="lz4", compression_lz4_level=12)
    with kbatch.Log.create(tmp_path / "t-0", cfg, now_ms=NOW) as log:
        log.append_table(tbl, NOW)
    with kbatch.Log.open(tmp_path / "t-0") as log:
        (batch,) = list(log.batches())
    want = kbatch.encode_columns(tbl, compression=kbatch.Compression.LZ4, compression_level=12,
                                 timestamp_extended=False)
    assert batch.raw == want
    assert want != kbatch.encode_columns(tbl, compression=kbatch.Compression.LZ4, timestamp_extended=False)


def test_cli_import_compression_level(tmp_path):
    from kbatch.cli.import_ import cmd_import

    rows = _records(100)
    src = tmp_path / "in.parquet"
    import pyarrow.parquet as pq
    pq.write_table(pa.table({"topic": ["t"] * len(rows), "partition": [0] * len(rows),
                             "key": [r[1] for r in rows], "value": [r[2] for r in rows],
                             "timestamp": pa.array([r[0] for r in rows], pa.timestamp("ms"))}), src)
    import io
    assert cmd_import(str(src), to=str(tmp_path / "out"), compression="gzip", compression_level=1,
                      quiet=True, out=io.StringIO(), err=io.StringIO()) == 0
    with kbatch.Log.open(tmp_path / "out" / "t-0") as log:
        (batch,) = list(log.batches())
    assert batch.compression == kbatch.Compression.GZIP
    body = batch.raw[W.RECORDS_OFFSET:]
    c = zlib.compressobj(1, zlib.DEFLATED, -15)
    assert body[10:-8] == c.compress(batch.records_bytes()) + c.flush()
    with pytest.raises(InvalidConfigurationError):
        cmd_import(str(src), to=str(tmp_path / "out2"), compression="gzip", compression_level=12, quiet=True,
                   out=io.StringIO(), err=io.StringIO())
