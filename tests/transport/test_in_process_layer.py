"""``mcp_tasks.layers.InProcessChannelLayer``: one process's channels and groups, shared by
its threads' event loops and by every instance of the layer that settings changes make."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from channels.layers import get_channel_layer
from django.test import override_settings

from mcp_tasks.layers import InProcessChannelLayer

IN_PROCESS = {"default": {"BACKEND": "mcp_tasks.layers.InProcessChannelLayer"}}
WAIT = 5.0


async def test_a_layer_made_again_by_a_settings_change_reaches_the_first_ones_listeners() -> None:
    with override_settings(CHANNEL_LAYERS=IN_PROCESS):
        listening = get_channel_layer()
        channel = await listening.new_channel()
        await listening.group_add("mcp_tasks.test.worker", channel)
    with override_settings(CHANNEL_LAYERS=IN_PROCESS):  # the next test's layer
        sending = get_channel_layer()
        assert sending is not listening
        await sending.group_send("mcp_tasks.test.worker", {"type": "mcp.task", "n": 1})
    message = await asyncio.wait_for(listening.receive(channel), WAIT)
    assert message == {"type": "mcp.task", "n": 1}
    await listening.group_discard("mcp_tasks.test.worker", channel)


async def test_a_sender_on_another_threads_loop_reaches_a_listener() -> None:
    layer = InProcessChannelLayer()
    channel = await layer.new_channel()
    await layer.group_add("mcp_tasks.test.threads", channel)

    def send_from_another_loop() -> None:
        other = InProcessChannelLayer()
        asyncio.run(other.group_send("mcp_tasks.test.threads", {"type": "mcp.task", "n": 2}))

    thread = threading.Thread(target=send_from_another_loop)
    thread.start()
    thread.join(WAIT)
    assert await asyncio.wait_for(layer.receive(channel), WAIT) == {"type": "mcp.task", "n": 2}
    await layer.group_discard("mcp_tasks.test.threads", channel)


async def test_layers_with_other_options_keep_their_own_groups() -> None:
    first, other = InProcessChannelLayer(), InProcessChannelLayer(capacity=7)
    channel = await first.new_channel()
    await first.group_add("mcp_tasks.test.options", channel)
    await other.group_send("mcp_tasks.test.options", {"type": "mcp.task"})
    receiving: Any = asyncio.ensure_future(first.receive(channel))
    done, _ = await asyncio.wait([receiving], timeout=0.2)
    assert not done
    receiving.cancel()
    await first.group_discard("mcp_tasks.test.options", channel)
