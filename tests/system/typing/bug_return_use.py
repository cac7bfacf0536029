import kbatch

v = kbatch.LogValidator()
out = v.validate_and_assign(b"", next_offset=0, now_ms=0)
print(out.hex())  # E: attr-defined
