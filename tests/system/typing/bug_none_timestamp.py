import kbatch

for batch in kbatch.iter_batches(b""):
    for rec in batch:
        age = 1_700_000_000_000 - rec.timestamp  # E: operator
