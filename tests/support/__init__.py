"""Helpers shared by the test folders: live servers and their settings, rq workers on a
private Redis, clients of both protocol eras, a browser, and result readers."""
