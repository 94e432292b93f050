"""A real `vimrag serve-search` in a second process on a free loopback port, for the search API tests."""

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def search_server(index: Path, timeout: float = 120.0):
    """Yields the server's search URL (http://127.0.0.1:PORT/search); stops the process afterwards."""
    import httpx

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve-search", "--index", str(index), "--port", str(port)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"vimrag serve-search exited with {proc.returncode}: {proc.stdout.read()}")
            try:
                if httpx.get(base + "/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"vimrag serve-search did not come up on port {port} in {timeout:.0f} s")
            time.sleep(0.3)
        yield base + "/search"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextlib.contextmanager
def serve_in_thread(app, timeout: float = 30.0):
    """Yields http://127.0.0.1:PORT for an ASGI `app` run by uvicorn in a thread of this process."""
    import threading

    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError(f"the test server did not start on port {port}")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
