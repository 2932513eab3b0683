"""An engine's error answer without a top-level `message` (nc47 S5): Podman 5.4's compat API answers a
push to an unreachable registry with HTTP 500 and the progress-stream shape
`{"errorDetail": {"message": ...}, "error": ...}`; docker-py 7.1's error constructor reads
body["message"] and raised KeyError, a traceback out of `toolkit push` (exit 1). Podman 5 does not run
on this machine (its Podman 4.3 answers 200 and puts the error in the stream), so the engine is stood in
for by a local HTTP server answering as Podman 5 did; the client is the toolkit's own (choice._adapted),
talking HTTP to it through the docker SDK."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import docker
import pytest
from docker.errors import APIError

from toolkit.engine.choice import _adapted

PODMAN5_PUSH = {
    "errorDetail": {
        "message": "trying to reuse blob sha256:23c8 at destination: pinging container registry localhost:5000: "
        'Get "https://localhost:5000/v2/": dial tcp [::1]:5000: connect: connection refused'
    },
    "error": "trying to reuse blob sha256:23c8 at destination: pinging container registry localhost:5000",
}


def _engine(body: bytes, status: int = 500):
    class Answer(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            # the request's body read first: a socket closed with unread bytes (docker-py posts "{}")
            # is reset by the kernel, and the client lost the answer it was reading (flaky in CI)
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST  # noqa: N815

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (json.dumps(PODMAN5_PUSH).encode(), "dial tcp [::1]:5000: connect: connection refused"),
        (json.dumps({"error": "no space left on device"}).encode(), "no space left on device"),
        (json.dumps(["a list", 1]).encode(), '["a list", 1]'),
        (
            json.dumps({"cause": "x", "message": "the usual shape", "response": 500}).encode(),
            "the usual shape",
        ),
        (b"plain text answer", "plain text answer"),
        (b"[" * 100_000 + b"]" * 100_000, "[[[["),  # brk47: RecursionError out of the SDK, exit 1
        (b'{"a":' * 5_000 + b"1" + b"}" * 5_000, '{"a":{"a":'),
        (json.dumps("a JSON string").encode(), "a JSON string"),
    ],
    ids=["podman5-push", "error-only", "list", "usual", "text", "deep-list", "deep-dict", "json-string"],
)
def test_an_error_answer_of_any_shape_is_an_api_error_with_the_engines_words(body, said):
    server = _engine(body)
    try:
        c = _adapted(docker.DockerClient(base_url=f"tcp://127.0.0.1:{server.server_port}", version="1.41"))
        with pytest.raises(APIError) as err:
            list(c.api.push("localhost:5000/me/cpu", tag="t", stream=True, decode=True))
        assert said in str(err.value.explanation), err.value.explanation
        assert not str(err.value.explanation).startswith('"'), err.value.explanation  # words, not quoted
        with pytest.raises(APIError):  # a call without a stream too
            c.api.tag("cpu", "localhost:5000/me/cpu", "t")
    finally:
        server.shutdown()
