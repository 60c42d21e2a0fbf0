"""Test-only tools app, installed by ``tests.support.live_settings`` into live servers."""
