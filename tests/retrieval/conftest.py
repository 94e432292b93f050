"""Fixtures for the retrieval tests."""

import pytest


@pytest.fixture
def hub_offline(monkeypatch):
    """huggingface_hub reads HF_HUB_OFFLINE once, at import: pin its constant too, in case it was imported
    before the environment variable was set."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
