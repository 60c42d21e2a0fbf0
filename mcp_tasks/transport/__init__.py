"""HTTP transport: the Channels consumer and its guards."""
