"""The project and the suite itself: checks, docs, layering, the example project, fixtures."""
