"""Settings of the live servers and rq workers of the background-input tests
(``tests/test_context_background_task.py``, ``tests/test_background_input.py``).

``tests.task_settings`` (its ``TASKS_*`` variables: hold window, lifespan…) plus:

- ``SEED_INPUT_TIMEOUT`` (seconds) → ``MCP_TASKS["INPUT_TIMEOUT"]``;
- ``SEED_CHANNEL_LAYER_URL`` → the Redis of the channel layer only (the rq queue stays on
  ``REDIS_URL``): point one worker at an unreachable Redis and announcing a question fails
  for real.
"""

import os

from tests.task_settings import *  # noqa: F403
from tests.task_settings import CHANNEL_LAYERS, MCP_TASKS, REDIS_PREFIX

if os.environ.get("SEED_INPUT_TIMEOUT"):
    MCP_TASKS = {**MCP_TASKS, "INPUT_TIMEOUT": float(os.environ["SEED_INPUT_TIMEOUT"])}

if os.environ.get("SEED_CHANNEL_LAYER_URL"):
    CHANNEL_LAYERS = {
        **CHANNEL_LAYERS,
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [os.environ["SEED_CHANNEL_LAYER_URL"]], "prefix": REDIS_PREFIX},
        },
    }
