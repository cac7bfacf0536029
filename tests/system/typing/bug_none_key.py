import kbatch

for batch in kbatch.iter_batches(b""):
    for rec in batch:
        print(rec.key.tobytes())  # E: union-attr
