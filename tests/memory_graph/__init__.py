"""Tests of memory_graph/."""
