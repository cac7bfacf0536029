import kbatch.server

with kbatch.server.serve("logs") as srv:
    # the bound port is an int: it does not concatenate with text
    address = "127.0.0.1:" + srv.port  # E: operator
