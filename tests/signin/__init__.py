"""Sign-in and permissions: OAuth, token verifiers, resource metadata, per-tool permissions."""
