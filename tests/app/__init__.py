"""Tests of app/."""
