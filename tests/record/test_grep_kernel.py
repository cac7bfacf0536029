"""grep_records_v2 (kbatch grep's kernel) on both backends, and RecordSearch over real batches.

The kernel's answer is checked against a naive reference over the fields the test itself
encoded (`naive`): the records whose selected key, value or header value holds the needle. The
differential tests feed both backends the same random sections (bytes from a tiny alphabet, so
needles land in varints and across field boundaries) and the same truncated and bit-flipped ones:
the same rows, or the same error as decode_records_v2 at the same byte position.
"""
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

import kbatch
from conftest import load_backend
from kbatch import _core_py
from kbatch.errors import KBatchError
from kbatch.record.search import RecordSearch
from record.test_kernels import DIFF, MUTATIONS, blob, mutate, outcome, record, varint, varlong

KEY, VALUE, HEADERS, NAMED = 1, 2, 4, 8
ALPHABET = b"ab\x00\x02\x04\x06"   # \x02 \x04 \x06: the varints of lengths 1, 2, 3
FIELD = st.none() | st.binary(max_size=6).map(lambda b: bytes(ALPHABET[x % len(ALPHABET)] for x in b))
HKEY = st.sampled_from([b"h", b"x", b"", b"hh"])
FIELDS = st.tuples(FIELD, FIELD, st.lists(st.tuples(HKEY, FIELD), max_size=3))


def both(*args):
    """grep_records_v2 on both backends: the same rows (as a tuple) or the same error."""
    cy = load_backend("cython")
    want = outcome(lambda *a: tuple(_core_py.grep_records_v2(*a)), *args)
    assert outcome(lambda *a: tuple(cy.grep_records_v2(*a)), *args) == want, args
    return want


def section(recs):
    return b"".join(record(key=k, value=v, headers=h, off_delta=i) for i, (k, v, h) in enumerate(recs))


def naive(recs, needle, fields, names=()):
    """The rows a grep must give: a selected, non-null field that holds the needle."""
    rows = []
    for i, (k, v, hs) in enumerate(recs):
        cands = ([k] if fields & KEY else []) + ([v] if fields & VALUE else [])
        cands += [hv for hk, hv in hs if fields & HEADERS or (fields & NAMED and hk in names)]
        if any(c is not None and needle in c for c in cands):
            rows.append(i)
    return rows


def test_hits_count_only_inside_the_selected_field(backend):
    recs = [(b"key-XY", b"value", [("h", b"hv-XY"), ("x", b"zz")]),
            (b"k", b"XYvalue", []),
            (b"X", b"Y", []),               # X | len(Y) | Y: across key and value, never a hit
            (None, None, [("x", b"XY")]),
            (b"", b"", [("XY", b"v")])]     # in a header key: not searched
    sec = section(recs)
    for fields, names, want in ((KEY, (), [0]), (VALUE, (), [1]), (HEADERS, (), [0, 3]), (NAMED, (b"x",), [3]),
                                (NAMED, (b"h", b"x"), [0, 3]), (KEY | VALUE | HEADERS, (), [0, 1, 3]),
                                (KEY | NAMED, (b"nope",), [0]), (0, (), [])):
        assert backend.grep_records_v2(sec, 0, len(sec), len(recs), 0, b"XY", fields, names) == want
    # a needle that is only in a length varint and its neighbours: the bytes are there, no field holds them
    assert b"X\x02Y" in sec
    assert backend.grep_records_v2(sec, 0, len(sec), len(recs), 0, b"X\x02Y", 15, [b"x", b"h"]) == []


def test_hits_in_a_section_inside_a_larger_buffer(backend):
    recs = [(b"a", b"needle", []), (b"b", b"hay", [])]
    sec = section(recs)
    data = b"needle" + sec + b"needle"
    assert backend.grep_records_v2(data, 6, 6 + len(sec), 2, 0, b"needle", VALUE) == [0]
    assert backend.grep_records_v2(bytearray(data), 6, 6 + len(sec), 2, 0, b"needle", KEY) == []


def test_every_record_of_many_and_none(backend):
    recs = [(b"k%d" % i, b"v%d-needle" % i if i % 3 else b"v", []) for i in range(200)]
    sec = section(recs)
    assert backend.grep_records_v2(sec, 0, len(sec), 200, 0, b"needle", VALUE) == [i for i in range(200) if i % 3]
    assert backend.grep_records_v2(sec, 0, len(sec), 200, 0, b"absent", 15) == []


@pytest.mark.parametrize("bad", ["truncated", "forged length", "huge varint", "count too high", "count too low",
                                 "negative header count", "huge header count", "negative key length"])
def test_a_damaged_section_raises_as_decode_does_with_or_without_a_hit(backend, bad):
    good = section([(b"k", b"needle", []), (b"k2", b"v", [("h", b"v")])])
    count = 2
    sec = good
    if bad == "truncated":
        sec = good[:-3]
    elif bad == "forged length":
        sec = varint(2**30) + good[1:]
    elif bad == "huge varint":
        sec = good + b"\xff" * 12
        count = 3
    elif bad == "count too high":
        count = 2**31 - 1
    elif bad == "count too low":
        count = 1
    elif bad == "negative header count":
        body = bytes([0]) + varlong(0) + varint(0) + blob(b"k") + blob(b"needle") + varint(-5)
        sec = varint(len(body)) + body
        count = 1
    elif bad == "huge header count":
        body = bytes([0]) + varlong(0) + varint(0) + blob(b"k") + blob(b"needle") + varint(10**6)
        sec = varint(len(body)) + body
        count = 1
    else:
        sec = varint(9) + bytes([0]) + varint(0) + varint(0) + varint(-7) + b"needle"
        count = 1
    want = outcome(backend.decode_records_v2, sec, 0, len(sec), count, 5, 0, None, 0, False)
    assert want[0] == "raise"
    for needle in (b"needle", b"absent"):
        assert outcome(lambda *a: tuple(backend.grep_records_v2(*a)), sec, 0, len(sec), count, 5, needle, 15) == want


def test_bad_arguments(backend):
    sec = section([(b"k", b"v", [])])
    with pytest.raises(ValueError, match="empty"):
        backend.grep_records_v2(sec, 0, len(sec), 1, 0, b"", 15)
    with pytest.raises(KBatchError):
        backend.grep_records_v2(sec, 0, len(sec) + 1, 1, 0, b"v", 15)
    with pytest.raises(KBatchError):
        backend.grep_records_v2(sec, 0, len(sec), -1, 0, b"v", 15)
    with pytest.raises(TypeError):
        backend.grep_records_v2(sec, 0, len(sec), 1, 0, "v", 15)


@DIFF
@given(recs=st.lists(FIELDS, max_size=6), needle=st.binary(min_size=1, max_size=3), cut=st.integers(0, 10**4),
       span=st.integers(1, 6), from_section=st.booleans(), fields=st.integers(0, 15),
       names=st.lists(HKEY, max_size=2))
def test_diff_grep_agrees_with_the_naive_reference(recs, needle, cut, span, from_section, fields, names):
    """Random fields over a tiny alphabet; the needle random or a slice of the section itself
    (so it spans fields, varints and records): both backends give the naive reference's rows."""
    sec = section(recs)
    if from_section and sec:
        i = cut % len(sec)
        needle = sec[i:i + span]
    needle = bytes(ALPHABET[x % len(ALPHABET)] for x in needle) if not from_section else needle
    want = naive(recs, needle, fields, names)
    assert both(sec, 0, len(sec), len(recs), 3, needle, fields, names) == ("ok", tuple(want))


@DIFF
@given(recs=st.lists(FIELDS, max_size=5), ops=MUTATIONS, needle=st.sampled_from([b"a", b"ab", b"\x02", b"zz"]),
       count_delta=st.sampled_from([0, 0, 0, -1, 1, -100, 2**31]), fields=st.integers(0, 15))
def test_diff_grep_on_damaged_sections(recs, ops, needle, count_delta, fields):
    """Truncated and bit-flipped sections: both backends the same rows or the same error, and an
    error exactly when decode_records_v2 raises one (the same one)."""
    sec = mutate(section(recs), ops)
    count = len(recs) + count_delta
    got = both(sec, 0, len(sec), count, 7, needle, fields, [b"h"])
    dec = outcome(_core_py.decode_records_v2, sec, 0, len(sec), count, 7, 0, None, 0, False)
    if dec[0] == "raise":
        assert got == dec
    else:
        assert got[0] == "ok"
        decoded = load_backend("cython").decode_records_v2(sec, 0, len(sec), count, 7, 0, None, 0, False)
        want = [i for i, r in enumerate(decoded) if RecordSearch(needle, key=bool(fields & KEY),
                value=bool(fields & VALUE), headers=bool(fields & HEADERS),
                header_names=["h"] if fields & NAMED else ()).matches(r)] if fields else []
        assert got == ("ok", tuple(want))


# ------------------------------------------------------------------------------------ RecordSearch
def _found(search, magic, codec, recs):
    """The offsets `search` finds in the batches holding `recs` (uncompressed legacy: one per record)."""
    b = kbatch.BatchBuilder(magic=magic, compression=codec, base_offset=40)
    for i, (k, v, h) in enumerate(recs):
        b.append(1000 + i, k, v, headers=h if magic == 2 else ())
    return [r.offset for batch in kbatch.iter_batches(b.build()) for r in search.matching(batch)]


@pytest.mark.parametrize("magic,codec", [(m, c) for m in (0, 1, 2) for c in kbatch.Compression
                                         if m == 2 or c != kbatch.Compression.ZSTD])   # zstd: magic 2 only
def test_record_search_every_magic_and_codec(backend, magic, codec):
    recs = [(b"k%d" % i, b"v%d" % i + (b"-needle" if i in (3, 17) else b""), [("h", b"needle" if i == 9 else b"")])
            for i in range(20)]
    assert _found(RecordSearch(b"needle"), magic, codec, recs) == ([43, 49, 57] if magic == 2 else [43, 57])
    assert _found(RecordSearch(b"needle", key=True), magic, codec, recs) == []
    assert _found(RecordSearch(b"NEEDLE", ignore_case=True, value=True), magic, codec, recs) == [43, 57]
    assert _found(RecordSearch(rb"v1\d-", regex=True), magic, codec, recs) == [57]


def test_record_search_raises_the_batch_error(backend):
    """A CRC-valid batch whose records do not decode (a forged section): the error
    Batch.records() raises, the one cat prints, whether or not the needle is in it."""
    body = record(key=b"k", value=b"needle")[:-1]   # one byte short
    crc_body = struct.pack(">hiqqqhii", 0, 0, 0, 0, -1, -1, -1, 1) + body
    import crc32c as crc32c_pkg
    data = struct.pack(">qiibI", 0, 9 + len(crc_body), 0, 2, crc32c_pkg.crc32c(crc_body)) + crc_body
    batch = next(iter(kbatch.iter_batches(data)))
    with pytest.raises(KBatchError) as cat_err:
        batch.records()
    for needle in (b"needle", b"absent"):
        batch = next(iter(kbatch.iter_batches(data)))
        with pytest.raises(KBatchError) as e:
            RecordSearch(needle).matching(batch)
        assert (type(e.value), str(e.value)) == (type(cat_err.value), str(cat_err.value))


def test_record_search_rejects_an_empty_pattern_and_a_bad_regex():
    with pytest.raises(ValueError, match="empty"):
        RecordSearch(b"")
    with pytest.raises(ValueError, match="regular expression"):
        RecordSearch("(", regex=True)


# ------------------------------------------------------------------------------------ many sections
def sections_outcome(mod, *args):
    return outcome(lambda *a: tuple((k, tuple(r)) for k, r in mod.grep_sections_v2(*a)), *args)


@DIFF
@given(secs=st.lists(st.tuples(st.lists(FIELDS, max_size=4), MUTATIONS, st.sampled_from([0, 0, 0, 1, -1])),
                     max_size=4),
       needle=st.sampled_from([b"a", b"ab", b"\x02", b"b\x00"]), fields=st.integers(0, 15))
def test_diff_grep_sections_is_grep_records_section_by_section(secs, needle, fields):
    """Several sections (some damaged) in one buffer: both backends the same [(k, rows)], the rows
    grep_records_v2 gives section by section, or the first damaged section's error."""
    data, starts, ends, counts = b"pad", [], [], []
    for recs, ops, delta in secs:
        sec = mutate(section(recs), ops)
        starts.append(len(data))
        data += sec
        ends.append(len(data))
        counts.append(len(recs) + delta)
        data += b"\x00\x7f"
    bases = [100 * k for k in range(len(secs))]
    args = (data, starts, ends, counts, bases, needle, fields, [b"h"])
    want = sections_outcome(_core_py, *args)
    assert sections_outcome(load_backend("cython"), *args) == want
    expect = []
    for k in range(len(secs)):
        one = outcome(lambda *a: tuple(_core_py.grep_records_v2(*a)), data, starts[k], ends[k], counts[k], bases[k],
                      needle, fields, [b"h"])
        if one[0] == "raise":
            assert want == one
            return
        if one[1]:
            expect.append((k, one[1]))
    assert want == ("ok", tuple(expect))


def test_grep_sections_arguments(backend):
    sec = section([(b"k", b"needle", [])])
    assert backend.grep_sections_v2(sec, [0, 0], [len(sec)] * 2, [1, 1], [0, 5], b"needle", VALUE) == [(0, [0]), (1, [0])]
    assert backend.grep_sections_v2(sec, [], [], [], [], b"needle", VALUE) == []
    with pytest.raises(ValueError, match="length"):
        backend.grep_sections_v2(sec, [0], [len(sec)], [1, 1], [0], b"needle", VALUE)
    with pytest.raises(KBatchError):
        backend.grep_sections_v2(sec, [0], [len(sec) + 1], [1], [0], b"needle", VALUE)


# ------------------------------------------------------------------------------------ regex prefilter
from kbatch.record.search import required_literal  # noqa: E402

ATOMS = st.sampled_from([b"a", b"b", b"ab", b"\\x00", b".", b"[ab]", b"(a|b)", b"a*", b"b?", b"(?:ab)+", b"\\b",
                         b"^", b"$", b"a{2}", b"[^a]"])


@pytest.mark.parametrize("pattern, literal", [(rb"order-\d+", b"order-"), (rb"(a|b)cd.ef", b"cd"),
                                              (rb"x*yz", b"yz"), (rb"(order)", None), (rb"a|bc", None),
                                              (rb"(?i)abc", None), (rb"ab\.cd", b"ab.cd")])
def test_required_literal(pattern, literal):
    assert required_literal(pattern) == literal
    assert required_literal(b"abc", __import__("re").IGNORECASE) is None


@DIFF
@given(atoms=st.lists(ATOMS, min_size=1, max_size=5), recs=st.lists(FIELDS, max_size=6), fields=st.integers(1, 15))
def test_diff_regex_with_the_kernel_prefilter_is_the_regex(atoms, recs, fields):
    """A regular expression over random fields: RecordSearch (the kernel finds the required literal
    first) gives the records a plain re.search over each selected field gives, on both backends."""
    import re

    import kbatch._backend

    pattern = b"".join(atoms)
    rx = re.compile(pattern)
    lit = required_literal(pattern)
    want = [i for i, (k, v, hs) in enumerate(recs)
            if any(f is not None and rx.search(f) for f in ([k] if fields & KEY else []) + ([v] if fields & VALUE else [])
                   + [hv for hk, hv in hs if fields & HEADERS or (fields & NAMED and hk == b"h")])]
    if lit is not None:  # sound: every field the regex matches holds the literal
        assert all(lit in f for k, v, hs in recs for f in [k, v, *(hv for _hk, hv in hs)]
                   if f is not None and rx.search(f))
    b = kbatch.BatchBuilder(base_offset=0)
    for k, v, hs in recs:
        b.append(1, k, v, headers=[(hk.decode(), hv) for hk, hv in hs])
    data = b.build() if recs else b""
    search = RecordSearch(pattern, regex=True, key=bool(fields & KEY), value=bool(fields & VALUE),
                          headers=bool(fields & HEADERS), header_names=["h"] if fields & NAMED else ())
    saved = kbatch._backend.core
    try:
        for mod in (_core_py, load_backend("cython")):
            kbatch._backend.core = mod
            got = [r.offset for batch in kbatch.iter_batches(data) for r in search.matching(batch)]
            assert got == want, (pattern, lit)
    finally:
        kbatch._backend.core = saved
