import kbatch

kbatch.compact("orders-0", now_ms="2024-05-01T00:00:00Z")  # E: arg-type
