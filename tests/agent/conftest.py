"""Fixtures of the agent tests: the fake OpenAI-compatible server (tests/agent/openai_fake.py) and policies on it,
and the fixed mixed results the layout tests read (tests/agent/layouts.py)."""

import pytest

from agent.backends.base import PolicyConfig
from agent.backends.openai_compat import OpenAIPolicy
from tests.agent.layouts import mixed_results
from tests.agent.openai_fake import FakeServer, delta, sse


@pytest.fixture(scope="module")
def fake_server():
    server = FakeServer()
    yield server
    server.stop()


@pytest.fixture
def server(fake_server):
    fake_server.requests.clear()
    fake_server.replies[:] = [sse(delta("ok"))]
    fake_server.models[:] = ["served-model", "other-model"]
    return fake_server


@pytest.fixture
def make_policy(server):
    """Build a policy on the fake server; sleeps are recorded, not slept, so retries cost no time."""
    made, sleeps = [], []

    def make(**settings) -> OpenAIPolicy:
        config = {
            "backend": "openai",
            "base_url": server.url,
            "model": "test-vlm",
            "api_key": "sk-test",
            "timeout_s": 2.0,
            "retries": 2,
            **settings,
        }
        image_format = config.pop("image_format", "png")
        policy = OpenAIPolicy(PolicyConfig(**config), image_format=image_format, backoff_s=0.01, sleep=sleeps.append)
        made.append(policy)
        return policy

    make.sleeps = sleeps
    yield make
    for policy in made:
        policy.close()


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """A poster, a text chunk, a 60 s video and a slide, as fixed search results."""
    return mixed_results(tmp_path_factory.mktemp("mixed"))
