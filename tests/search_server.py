"""A real `vimrag serve-search` in a second process on a free loopback port, for the search API tests."""

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

from retrieval.server import free_port

REPO = Path(__file__).resolve().parents[1]


def wait_healthy(proc: subprocess.Popen, base: str, what: str, output, timeout: float) -> None:
    """Returns once GET {base}/health answers 200; if `proc` exits first or `timeout` passes, stops it and
    raises a RuntimeError naming `what` with `output()` (its log)."""
    import httpx

    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            if httpx.get(base + "/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    why = f"exited with {proc.returncode}" if proc.poll() is not None else f"did not come up in {timeout:.0f} s"
    stop(proc)
    raise RuntimeError(f"{what} at {base} {why}: {output()}")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()


@contextlib.contextmanager
def search_server(index: Path, timeout: float = 120.0, extra: tuple[str, ...] = ()):
    """Yields the server's search URL (http://127.0.0.1:PORT/search); stops the process afterwards. `extra`: more
    `vimrag serve-search` flags."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve-search", "--index", str(index), "--port", str(port), *extra],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(proc, base, "vimrag serve-search", proc.stdout.read, timeout)
        yield base + "/search"
    finally:
        stop(proc)


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
