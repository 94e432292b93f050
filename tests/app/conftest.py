"""Fixtures for the web demo tests: an in-process demo app on a free loopback port, over the generated mixed
corpus (already indexed once)."""

import os
import shutil

import pytest

from tests.search_server import free_port


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
