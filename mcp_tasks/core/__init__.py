"""The base every layer stands on: JSON-RPC, the ORM from async code, background
coroutines, group names, the task contract and the hooks."""
