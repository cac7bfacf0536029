"""A real S3 API on loopback for the tests: moto's server mode behind a small counting proxy.

The proxy forwards every request to moto unchanged and records what it answered (method, path,
Range header, body bytes), so a test can hold kbatch's own request counts (kbatch._fs.io_stats)
to what the server really sent. Everything binds 127.0.0.1 on a free port; bounded timeouts.
"""
from __future__ import annotations

import http.client
import http.server
import os
import threading
from contextlib import contextmanager

ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL",
       "AWS_EC2_METADATA_DISABLED")


class _Forward(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _body(self) -> bytes:
        """The request body as it came: Content-Length bytes, or chunked framing passed on raw
        (pyarrow uploads with Transfer-Encoding: chunked)."""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            raw = bytearray()
            while True:
                line = self.rfile.readline(65537)
                raw += line
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while True:  # trailers, up to the empty line
                        t = self.rfile.readline(65537)
                        raw += t
                        if t in (b"\r\n", b"\n", b""):
                            return bytes(raw)
                raw += self.rfile.read(size + 2)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _forward(self):
        body = self._body()
        up = http.client.HTTPConnection("127.0.0.1", self.server.upstream_port, timeout=30)
        try:
            up.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for k, v in self.headers.items():
                if k.lower() != "connection":
                    up.putheader(k, v)
            up.endheaders(body or None)
            resp = up.getresponse()
            data = resp.read()
            with self.server.lock:
                self.server.log.append((self.command, self.path, self.headers.get("Range"), len(data)))
            self.send_response(resp.status, resp.reason)
            for k, v in resp.getheaders():
                if k.lower() in ("transfer-encoding", "connection") or (k.lower() == "content-length"
                                                                        and self.command != "HEAD"):
                    continue
                self.send_header(k, v)
            if self.command != "HEAD":
                self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
        finally:
            up.close()

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _forward

    def log_message(self, *args):
        pass


class S3Server:
    """moto (ThreadedMotoServer) + the counting proxy; `endpoint` is the proxy's URL."""

    def __init__(self):
        from moto.server import ThreadedMotoServer

        import logging
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self.moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.moto.start()
        _host, port = self.moto.get_host_and_port()
        self.moto_endpoint = f"http://127.0.0.1:{port}"
        self.proxy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Forward)
        self.proxy.daemon_threads = True
        self.proxy.upstream_port = port
        self.proxy.log = []
        self.proxy.lock = threading.Lock()
        self._thread = threading.Thread(target=self.proxy.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()
        self.endpoint = f"http://127.0.0.1:{self.proxy.server_address[1]}"
        import boto3

        self.client = boto3.client("s3", endpoint_url=self.moto_endpoint, region_name="us-east-1",
                                   aws_access_key_id="testing", aws_secret_access_key="testing")

    def env(self) -> dict:
        """What a user sets: credentials and the endpoint in the environment, never in a URI."""
        return {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
                "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": self.endpoint,
                "AWS_EC2_METADATA_DISABLED": "true"}

    def bucket(self, name: str) -> str:
        self.client.create_bucket(Bucket=name)
        return name

    def upload_tree(self, local_root: str, bucket: str, prefix: str) -> str:
        """Copy a local directory tree to s3://bucket/prefix/ (straight to moto: not counted)."""
        for d, _dirs, files in os.walk(local_root):
            for f in files:
                p = os.path.join(d, f)
                if os.path.isfile(p):
                    key = f"{prefix}/{os.path.relpath(p, local_root)}".replace(os.sep, "/")
                    self.client.upload_file(p, bucket, key)
        return f"s3://{bucket}/{prefix}"

    @contextmanager
    def counting(self):
        """Yield a list that, after the block, holds the proxy's (method, path, range, bytes) records."""
        with self.proxy.lock:
            start = len(self.proxy.log)
        out = []
        yield out
        with self.proxy.lock:
            out.extend(self.proxy.log[start:])

    def stop(self):
        self.proxy.shutdown()
        self.proxy.server_close()
        self.moto.stop()


@contextmanager
def environment(values: dict):
    old = {k: os.environ.get(k) for k in ENV}
    os.environ.update(values)
    from kbatch import _fs

    _fs.clear_cache()
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        _fs.clear_cache()
