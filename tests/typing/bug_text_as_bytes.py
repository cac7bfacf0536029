import kbatch

batches = list(kbatch.iter_batches("00000000000000000000.log"))  # E: arg-type
