import kbatch

for batch in kbatch.iter_batches(b""):
    if batch.compression == "zstd":  # E: comparison-overlap
        print("zstd")
