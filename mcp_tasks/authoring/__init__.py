"""The authoring API: the registry and its ``@mcp`` decorators, what a tool sees
of its caller (``Context``), its questions, retries and lifespan."""
