import kbatch.server

# serve's options are ServerConfig's fields: a misspelt one is refused, not silently ignored
with kbatch.server.serve("logs", listen="127.0.0.1:0", readonly=True) as srv:  # E: call-arg
    print(srv.bootstrap)
