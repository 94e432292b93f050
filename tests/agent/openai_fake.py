"""A fake OpenAI-compatible server for the backend tests: http.server in a thread on 127.0.0.1, replaying a script
of canned replies (SSE streams, JSON bodies, error statuses, stalls, hang-ups) and recording every request; and
the helpers the tests build their messages and checks from. Its fixtures are in tests/agent/conftest.py."""

from __future__ import annotations

import base64
import io
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from PIL import Image

# --- the fake server ------------------------------------------------------------------------------------


def delta(content) -> str:
    chunk = {"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}]}
    return f"data: {json.dumps(chunk)}\n\n"


def sse(*events: str, stall_s: float = 0.0, done: bool = True):
    """An SSE reply: raw event strings, then optionally a stall (to break the stream mid-answer), then [DONE]."""

    def reply(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.end_headers()
        for event in events:
            h.wfile.write(event.encode())
            h.wfile.flush()
        time.sleep(stall_s)
        if done:
            finish = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
            h.wfile.write(f"data: {json.dumps(finish)}\n\ndata: [DONE]\n\n".encode())

    return reply


def body(status: int, payload, headers: dict | None = None, delay_s: float = 0.0):
    """A plain reply: one body (JSON unless a str) with a status; optional delay before the headers."""

    def reply(h: BaseHTTPRequestHandler) -> None:
        time.sleep(delay_s)
        data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            h.send_header(key, value)
        h.end_headers()
        h.wfile.write(data)

    return reply


def hang_up(h: BaseHTTPRequestHandler) -> None:
    """Close the connection without a response (the client sees a protocol error)."""


def answer(text: str) -> dict:
    return {
        "id": "x",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
    }


class FakeServer:
    def __init__(self):
        self.requests: list[dict] = []  # {"method", "path", "headers", "json"}
        self.replies: list = []  # consumed in order for POSTs; the last one repeats
        self.models: list[str] = ["served-model", "other-model"]
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                pass

            def _record(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                server.requests.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "headers": dict(self.headers),
                        "json": json.loads(raw) if raw else None,
                    }
                )

            def do_GET(self):
                self._record()
                if self.path == "/v1/models":
                    body(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in server.models]})(self)
                else:
                    body(404, {"detail": "Not Found"})(self)

            def do_POST(self):
                self._record()
                reply = server.replies.pop(0) if len(server.replies) > 1 else server.replies[0]
                reply(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.handle_error = lambda request, address: None  # a client that timed out leaves a broken pipe
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def posts(self) -> list[dict]:
        return [r for r in self.requests if r["method"] == "POST"]

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def has_key(obj, key: str) -> bool:
    if isinstance(obj, dict):
        return key in obj or any(has_key(v, key) for v in obj.values())
    if isinstance(obj, list):
        return any(has_key(v, key) for v in obj)
    return False


def decode_data_url(url: str) -> Image.Image:
    header, encoded = url.split(",", 1)
    assert header.endswith(";base64")
    return Image.open(io.BytesIO(base64.b64decode(encoded)))


QUESTION = "What does Picture 1 show?"


def vision_messages() -> list[dict]:
    page = Image.new("RGB", (64, 40), (255, 255, 255))
    crop = Image.new("RGBA", (30, 18), (10, 20, 30, 255))
    return [
        {"role": "system", "content": "You are a careful research agent."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": QUESTION},
                {"type": "image", "image": page, "ref": "Picture 1"},
                {"type": "text", "text": "Picture 2 (crop):", "ref": "Picture 2"},  # a caption may carry a ref too
                {"type": "image", "image": crop, "ref": "Picture 2"},
            ],
        },
    ]
