"""Test-only tools app, installed by ``tests.live_settings`` into live servers."""
