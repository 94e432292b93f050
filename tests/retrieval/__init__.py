"""Tests of retrieval/."""
