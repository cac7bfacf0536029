import kbatch

b = kbatch.BatchBuilder()
b.append(0, b"k", b"v", headers={"trace": b"1"})  # E: dict-item
