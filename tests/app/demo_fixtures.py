"""Fixtures and helpers for the web demo tests: an in-process demo app on a free loopback port, over the
generated mixed corpus (already indexed once). Not named conftest.py: --doctest-modules would import it as a
second module called `conftest` beside tests/conftest.py."""

import os
import shutil
import socket
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def demo_server(mixed_corpus, mixed_index, tmp_path_factory):
    """(url, DemoApp) of a running app: embedded policy with the keyword LM (fast, deterministic)."""
    from app.web import DemoApp, default_settings, prepare_env
    from app.workspace import Workspace

    root = tmp_path_factory.mktemp("demo_ws")
    shutil.copytree(mixed_index, root / "index")
    ws = Workspace(root, corpus=mixed_corpus, max_upload_mb=5)
    old = {k: os.environ.get(k) for k in ("GRADIO_TEMP_DIR", "GRADIO_ANALYTICS_ENABLED")}
    os.environ["GRADIO_TEMP_DIR"] = str(ws.cache)
    prepare_env(ws)
    app = DemoApp(ws, default_settings("embedded", model="keyword"))
    port = free_port()
    demo = app.launch(port=port, prevent_thread_lock=True, quiet=True)  # the default host: must be loopback
    try:
        yield f"http://127.0.0.1:{port}", app
    finally:
        demo.close()
        ws.close()
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def last_answer(chat: list[dict]) -> str:
    """The text of the final answer message (the last assistant message without a step title)."""
    for m in reversed(chat):
        if m["role"] == "assistant" and not (m.get("metadata") or {}).get("title"):
            return content_text(m)
    return ""


def content_text(m: dict) -> str:
    c = m.get("content")
    if isinstance(c, list):
        return "\n".join(p.get("text", "") for p in c if isinstance(p, dict))
    return str(c or "")


def titles(chat: list[dict]) -> list[str]:
    return [(m.get("metadata") or {}).get("title") or "" for m in chat]


REPO = Path(__file__).resolve().parents[2]
