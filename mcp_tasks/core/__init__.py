"""The base every layer stands on: JSON-RPC envelopes, the ORM from async code, background
coroutines, channel-layer group names, the task contract, and freezing start-up objects
out of the cyclic garbage collector."""
