"""Fixtures for the official MCP conformance suite (npm ``@modelcontextprotocol/conformance``).

The suite's server scenarios call tools, prompts and resources by fixed names and check
their exact shapes; each fixture below names the scenario(s) that use it. ``.ci/conformance.sh``
runs the suite against the example project. Importing this module registers everything.

Keep ``test_simple_text`` the first tool registered here (and this module imported before
any other): ``http-header-validation`` calls the *first* listed tool with ``{}`` and needs a
plain success.
"""

from __future__ import annotations

import asyncio
import base64
import json
import struct
import zlib
from typing import Annotated, Any

import mcp_types as types
from pydantic import Field

from mcp_tasks import (
    AcceptedElicitation,
    Context,
    ElicitInput,
    ProtocolError,
    RootsInput,
    SampleInput,
    TaskConfig,
    ToolError,
    mcp,
)

# -- test data ------------------------------------------------------------------------------


def _png_pixel(red: int, green: int, blue: int) -> bytes:
    """A valid 1x1 RGB PNG, built here rather than pasted in."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # 1x1, 8-bit RGB
    pixels = zlib.compress(bytes([0, red, green, blue]))  # filter byte + one pixel
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def _wav_silence(samples: int = 8, rate: int = 8000) -> bytes:
    """A valid mono 16-bit PCM WAV holding ``samples`` samples of silence."""
    data = b"\x00\x00" * samples
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)
    body = (
        b"WAVE"
        + b"fmt "
        + struct.pack("<I", len(fmt))
        + fmt
        + b"data"
        + struct.pack("<I", len(data))
        + data
    )
    return b"RIFF" + struct.pack("<I", len(body)) + body


PNG_BYTES = _png_pixel(255, 0, 0)
PNG_BASE64 = base64.b64encode(PNG_BYTES).decode("ascii")
WAV_BASE64 = base64.b64encode(_wav_silence()).decode("ascii")

NAME_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
}
CONFIRM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
}


def _content_text(result: types.CreateMessageResult) -> str:
    """The text of a sampling answer (a single block, or the first text block of a list)."""
    blocks = result.content if isinstance(result.content, list) else [result.content]
    for block in blocks:
        if isinstance(block, types.TextContent):
            return block.text
    return "(no text)"


def _accepted_content(answer: Any) -> dict[str, Any]:
    """The content dict of an accepted raw-form elicitation, else ``{}``."""
    if isinstance(answer, AcceptedElicitation) and isinstance(answer.data, dict):
        return answer.data
    return {}


# -- tools: content types (tools-list, tools-call-*) -----------------------------------------


@mcp.tool()
def test_simple_text() -> str:
    """Returns one text block (tools-call-simple-text)."""
    return "This is a simple text response for testing."


@mcp.tool()
def test_image_content() -> list[types.ImageContent]:
    """Returns one PNG image block (tools-call-image)."""
    return [types.ImageContent(type="image", data=PNG_BASE64, mime_type="image/png")]


@mcp.tool()
def test_audio_content() -> list[types.AudioContent]:
    """Returns one WAV audio block (tools-call-audio)."""
    return [types.AudioContent(type="audio", data=WAV_BASE64, mime_type="audio/wav")]


@mcp.tool()
def test_embedded_resource() -> list[types.EmbeddedResource]:
    """Returns one embedded text resource (tools-call-embedded-resource)."""
    return [
        types.EmbeddedResource(
            type="resource",
            resource=types.TextResourceContents(
                uri="test://embedded-resource",
                mime_type="text/plain",
                text="This is an embedded resource content.",
            ),
        )
    ]


@mcp.tool()
def test_multiple_content_types() -> list[
    types.TextContent | types.ImageContent | types.EmbeddedResource
]:
    """Returns text, image and embedded resource blocks (tools-call-mixed-content)."""
    return [
        types.TextContent(type="text", text="Multiple content types test:"),
        types.ImageContent(type="image", data=PNG_BASE64, mime_type="image/png"),
        types.EmbeddedResource(
            type="resource",
            resource=types.TextResourceContents(
                uri="test://mixed-content-resource",
                mime_type="application/json",
                text=json.dumps({"test": "data", "value": 123}),
            ),
        ),
    ]


@mcp.tool()
def test_error_handling() -> str:
    """Always fails with a tool error: an ``isError`` result (tools-call-error)."""
    raise ToolError("This tool intentionally returns an error for testing")


# -- tools: notifications during a call --------------------------------------------------------


@mcp.tool()
async def test_tool_with_logging(ctx: Context) -> str:
    """Sends three info log messages ~50 ms apart (tools-call-with-logging, legacy)."""
    await ctx.info("Tool execution started")
    await asyncio.sleep(0.05)
    await ctx.info("Tool processing data")
    await asyncio.sleep(0.05)
    await ctx.info("Tool execution completed")
    return "Tool with logging executed successfully"


@mcp.tool()
async def test_logging_tool(ctx: Context) -> str:
    """Logs at info level; a modern request without ``_meta`` logLevel must get no
    ``notifications/message`` (server-stateless, sep-2575-server-no-log-without-loglevel)."""
    await ctx.info("test_logging_tool: first message")
    await ctx.info("test_logging_tool: second message")
    return "logged two messages"


@mcp.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress 0, 50 and 100 of 100, ~50 ms apart (tools-call-with-progress)."""
    for step in (0, 50, 100):
        if step:
            await asyncio.sleep(0.05)
        await ctx.report_progress(step, 100, f"Completed step {step} of 100")
    return "Progress reported: 0, 50, 100 of 100"


@mcp.tool()
async def test_reconnection(ctx: Context) -> str:
    """Closes its SSE stream mid-call, then finishes; the client resumes with
    ``Last-Event-ID`` (server-sse-polling, legacy 2025-11-25, SEP-1699)."""
    await ctx.info("Before disconnect")
    await ctx.close_sse_stream()
    await asyncio.sleep(0.2)
    await ctx.info("After reconnect")
    return "Reconnection test completed"


@mcp.tool()
async def test_trigger_tool_change(ctx: Context) -> str:
    """Announces a tool-list change to ``subscriptions/listen`` streams (server-stateless)."""
    await ctx.send_list_changed("tools")
    return "tool list changed"


@mcp.tool()
async def test_trigger_prompt_change(ctx: Context) -> str:
    """Announces a prompt-list change to ``subscriptions/listen`` streams (server-stateless)."""
    await ctx.send_list_changed("prompts")
    return "prompt list changed"


# -- tools: asking the client (legacy server->client requests) ----------------------------------


@mcp.tool()
async def test_sampling(prompt: str, ctx: Context) -> str:
    """Asks the client's LLM via ``sampling/createMessage`` (tools-call-sampling, legacy)."""
    result = await ctx.sample(prompt, max_tokens=100)
    return f"LLM response: {_content_text(result)}"


@mcp.tool()
async def test_elicitation(message: str, ctx: Context) -> str:
    """Asks the user for a username and an email (tools-call-elicitation, legacy)."""
    answer = await ctx.elicit_form(
        message,
        {
            "type": "object",
            "properties": {
                "username": {"type": "string", "description": "User's response"},
                "email": {"type": "string", "description": "User's email address"},
            },
            "required": ["username", "email"],
        },
    )
    return f"User response: action={answer.action}, content={json.dumps(_accepted_content(answer))}"


@mcp.tool()
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Elicits every primitive type with a default (elicitation-sep1034-defaults, legacy)."""
    answer = await ctx.elicit_form(
        "Please review your details",
        {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "User name", "default": "John Doe"},
                "age": {"type": "integer", "description": "User age", "default": 30},
                "score": {"type": "number", "description": "User score", "default": 95.5},
                "status": {
                    "type": "string",
                    "description": "User status",
                    "enum": ["active", "inactive", "pending"],
                    "default": "active",
                },
                "verified": {"type": "boolean", "description": "Verified user", "default": True},
            },
        },
    )
    return f"Elicitation completed: action={answer.action}, content={json.dumps(_accepted_content(answer))}"


@mcp.tool()
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Elicits the five enum shapes of SEP-1330 (elicitation-sep1330-enums, legacy)."""
    answer = await ctx.elicit_form(
        "Please pick some options",
        {
            "type": "object",
            "properties": {
                "untitledSingle": {
                    "type": "string",
                    "description": "Single choice, no titles",
                    "enum": ["option1", "option2", "option3"],
                },
                "titledSingle": {
                    "type": "string",
                    "description": "Single choice with titles",
                    "oneOf": [
                        {"const": "value1", "title": "First Option"},
                        {"const": "value2", "title": "Second Option"},
                        {"const": "value3", "title": "Third Option"},
                    ],
                },
                "legacyEnum": {
                    "type": "string",
                    "description": "Single choice, legacy enumNames",
                    "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"],
                },
                "untitledMulti": {
                    "type": "array",
                    "description": "Several choices, no titles",
                    "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
                },
                "titledMulti": {
                    "type": "array",
                    "description": "Several choices with titles",
                    "items": {
                        "anyOf": [
                            {"const": "value1", "title": "First Choice"},
                            {"const": "value2", "title": "Second Choice"},
                            {"const": "value3", "title": "Third Choice"},
                        ]
                    },
                },
            },
        },
    )
    return f"Elicitation completed: action={answer.action}, content={json.dumps(_accepted_content(answer))}"


# -- tools: modern-only diagnostics (server-stateless, SEP-2575) --------------------------------


@mcp.tool()
async def test_missing_capability(ctx: Context) -> str:
    """Needs the client's ``sampling`` capability; without it answers the JSON-RPC error
    -32021 with ``data.requiredCapabilities = {"sampling": {}}`` (HTTP 400)."""
    if "sampling" not in ctx.client_capabilities:
        raise ProtocolError(
            -32021,
            "This tool requires the client 'sampling' capability",
            {"requiredCapabilities": {"sampling": {}}},
        )
    return "The client declared sampling."


@mcp.tool()
async def test_streaming_elicitation(ctx: Context) -> str:
    """Asks a question during a modern call: the answer to the first round must be an
    ``input_required`` result, never a server->client request on the stream."""
    answer = await ctx.elicit_form(
        "Anything to add?", {"type": "object", "properties": {"note": {"type": "string"}}}
    )
    return f"note: {_accepted_content(answer).get('note', '')}"


# -- tools: MRTR, input during a plain modern call (input-required-result-*, SEP-2322) ----------


@mcp.tool()
async def test_input_required_result_elicitation(ctx: Context) -> str:
    """Round 1: ``input_required`` with the literal key ``user_name``; round 2 (which the suite
    may send without any ``requestState``): ``Hello, <name>!``."""
    answer = await ctx.elicit_form("What is your name?", NAME_SCHEMA, key="user_name")
    return f"Hello, {_accepted_content(answer).get('name', 'stranger')}!"


@mcp.tool()
async def test_input_required_result_sampling(ctx: Context) -> str:
    """Round 1: a ``sampling/createMessage`` input request; round 2: the model's answer."""
    result = await ctx.sample("What is the capital of France?", max_tokens=100)
    return f"Model said: {_content_text(result)}"


@mcp.tool()
async def test_input_required_result_list_roots(ctx: Context) -> str:
    """Round 1: a ``roots/list`` input request; round 2: the roots the client gave."""
    roots = await ctx.list_roots()
    return f"Client exposed {len(roots)} root(s): {', '.join(str(root.uri) for root in roots)}"


@mcp.tool()
async def test_input_required_result_request_state(ctx: Context) -> str:
    """Round 1 carries a (sealed) ``requestState``; round 2 echoes it and gets ``state-ok``."""
    answer = await ctx.elicit_form("Please confirm", CONFIRM_SCHEMA)
    return f"state-ok: confirmed={_accepted_content(answer).get('ok')}"


@mcp.tool()
async def test_input_required_result_multiple_inputs(ctx: Context) -> str:
    """One round asking for an elicitation, a sampling and the roots at once."""
    answers = await ctx.gather_inputs(
        {
            "user_name": ElicitInput("What is your name?", schema=NAME_SCHEMA),
            "greeting": SampleInput("Generate a greeting", max_tokens=50),
            "client_roots": RootsInput(),
        }
    )
    name = _accepted_content(answers["user_name"]).get("name", "?")
    return (
        f"All inputs received: name={name}, greeting={_content_text(answers['greeting'])}, "
        f"roots={len(answers['client_roots'])}"
    )


@mcp.tool()
async def test_input_required_result_multi_round(ctx: Context) -> str:
    """Three rounds: the name, then the colour (a new ``requestState`` each time), then the
    result."""
    name = _accepted_content(await ctx.elicit_form("Step 1: What is your name?", NAME_SCHEMA)).get(
        "name"
    )
    color = _accepted_content(
        await ctx.elicit_form(
            "Step 2: What is your favorite color?",
            {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]},
        )
    ).get("color")
    return f"{name} likes {color}."


@mcp.tool()
async def test_input_required_result_tampered_state(ctx: Context) -> str:
    """Round 1 carries a sealed ``requestState``; a modified echo must be rejected (-32602)."""
    answer = await ctx.elicit_form("Please confirm", CONFIRM_SCHEMA)
    return f"state-ok: confirmed={_accepted_content(answer).get('ok')}"


@mcp.tool()
async def test_input_required_result_capabilities(ctx: Context) -> str:
    """Asks only for what this request's client capabilities allow: sampling, then
    elicitation."""
    received = []
    if "sampling" in ctx.client_capabilities:
        received.append(_content_text(await ctx.sample("Say hello", max_tokens=50)))
    if "elicitation" in ctx.client_capabilities:
        answer = await ctx.elicit_form("What is your name?", NAME_SCHEMA)
        received.append(str(_accepted_content(answer).get("name")))
    if not received:
        return "The client declared neither sampling nor elicitation."
    return f"Received: {', '.join(received)}"


# -- tools: SEP-2243 custom header, JSON Schema 2020-12 -----------------------------------------


@mcp.tool()
def test_x_mcp_header(
    region: Annotated[
        str,
        Field(
            description="Mirrored into the Mcp-Param-Region request header",
            json_schema_extra={"x-mcp-header": "Region"},
        ),
    ] = "<none>",
) -> str:
    """Echoes a parameter that clients mirror into ``Mcp-Param-Region``
    (http-custom-header-server-validation, SEP-2243)."""
    return f"region={region}"


JSON_SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


@mcp.tool(input_schema=JSON_SCHEMA_2020_12)
def json_schema_2020_12_tool(
    name: str | None = None,
    address: dict[str, Any] | None = None,
    contactMethod: str | None = None,  # noqa: N803 - the schema's property name
    phone: str | None = None,
    email: str | None = None,
) -> str:
    """Advertises an inputSchema using JSON Schema 2020-12 keywords ($schema, $defs,
    $anchor, allOf/anyOf, if/then/else, additionalProperties) (json-schema-2020-12)."""
    how = phone if contactMethod == "phone" else email
    return f"contact {name or 'someone'} via {contactMethod or 'email'}: {how}"


# -- tools: background tasks (tasks-*, io.modelcontextprotocol/tasks, SEP-2663) ----------------


@mcp.tool()
def greet(name: str) -> str:
    """Sync-only: never runs as a task; returns ``Hello, <name>!``."""
    return f"Hello, {name}!"


@mcp.tool(task=True)
async def slow_compute(ctx: Context, seconds: float = 0, label: str = "") -> str:
    """Task-supporting: sleeps ``seconds`` (cancellable at every step), then returns."""
    remaining = max(0.0, seconds)
    while remaining > 0:
        step = min(remaining, 0.25)
        await asyncio.sleep(step)
        remaining -= step
        await ctx.report_progress(seconds - remaining, seconds, f"{label or 'compute'}: working")
    return f"slow_compute {label or '(no label)'} finished after {seconds:g}s"


# The suite's contract (scenario tasks-required-task-error): a task-only tool called without
# the tasks extension is refused with -32021, so this one is not served to such clients as
# a task with a handle (README "Clients without tasks"; the site's other tools are).
@mcp.tool(task=TaskConfig(mode="required", for_all_clients=False))
async def failing_job() -> str:
    """Task-only: after ~1 s fails with a tool error, so the task ends ``completed`` with
    ``result.isError`` (and without the tasks extension the call is -32021)."""
    await asyncio.sleep(1)
    raise ToolError("failing_job failed on purpose")


@mcp.tool(task=True)
async def protocol_error_job() -> str:
    """Task-supporting: ends with a JSON-RPC error, so the task ends ``failed`` with an
    inlined ``error`` and no ``result``."""
    await asyncio.sleep(0.1)
    raise ProtocolError(-32603, "protocol_error_job: simulated internal failure")


@mcp.tool(task=True)
async def confirm_delete(filename: str, ctx: Context) -> str:
    """Task-supporting: asks once for confirmation (one ``elicitation/create`` input request),
    then completes."""
    answer = await ctx.elicit_form(
        f"Delete {filename}?",
        {
            "type": "object",
            "properties": {"confirm": {"type": "boolean", "description": "Really delete it?"}},
            "required": ["confirm"],
        },
    )
    if _accepted_content(answer).get("confirm"):
        return f"Deleted {filename}."
    return f"Kept {filename} ({answer.action})."


@mcp.tool(task=True)
async def multi_input(ctx: Context) -> str:
    """Task-supporting: asks two questions at once, so two input requests are pending
    together; each can be answered separately."""
    answers = await ctx.gather_inputs(
        {
            "name": ElicitInput(
                "Who is asking?",
                schema={
                    "type": "object",
                    "properties": {"name": {"type": "string"}},
                    "required": ["name"],
                },
            ),
            "confirm": ElicitInput(
                "Proceed?",
                schema={
                    "type": "object",
                    "properties": {"confirm": {"type": "boolean"}},
                    "required": ["confirm"],
                },
            ),
        }
    )
    name = _accepted_content(answers["name"]).get("name")
    confirmed = _accepted_content(answers["confirm"]).get("confirm")
    return f"multi_input: name={name}, confirm={confirmed}"


async def _ask_user_name(ctx: Context) -> str:
    """``prepare`` of ``test_tool_with_task``: runs inline, before the task exists."""
    answer = await ctx.elicit_form("What is your name?", NAME_SCHEMA)
    return str(_accepted_content(answer).get("name", "stranger"))


@mcp.tool(task=TaskConfig(mode="required", prepare=_ask_user_name))
async def test_tool_with_task(ctx: Context) -> str:
    """Task-only, MRTR first: round 1 asks for the user's name (``input_required``); round 2
    creates the background task, whose result greets that name (tasks-mrtr-composition)."""
    await asyncio.sleep(0.1)
    return f"Hello from the background, {ctx.prepared}!"


# -- resources (resources-*, caching, sep-2164-resource-not-found) ------------------------------


@mcp.resource("test://static-text", mime_type="text/plain", description="A static text resource")
def static_text() -> str:
    return "This is the content of the static text resource."


@mcp.resource("test://static-binary", mime_type="image/png", description="A static PNG image")
def static_binary() -> bytes:
    return PNG_BYTES


@mcp.resource(
    "test://template/{id}/data",
    mime_type="application/json",
    description="A templated JSON resource; {id} is substituted",
)
def template_data(id: str) -> str:  # noqa: A002 - the URI template's variable name
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@mcp.resource(
    "test://watched-resource",
    mime_type="text/plain",
    description="A resource clients may subscribe to (resources-subscribe, legacy)",
)
def watched_resource() -> str:
    return "Watched resource content"


# -- prompts (prompts-*, input-required-result-non-tool-request) --------------------------------


@mcp.prompt()
def test_simple_prompt() -> list[types.PromptMessage]:
    """A prompt without arguments."""
    return [
        types.PromptMessage(
            role="user",
            content=types.TextContent(type="text", text="This is a simple prompt for testing."),
        )
    ]


@mcp.prompt()
def test_prompt_with_arguments(
    arg1: Annotated[str, Field(description="First test argument")],
    arg2: Annotated[str, Field(description="Second test argument")],
) -> list[types.PromptMessage]:
    """A prompt with two required arguments."""
    text = f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"
    return [types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))]


@mcp.prompt()
def test_prompt_with_embedded_resource(
    resourceUri: Annotated[str, Field(description="URI of the resource to embed")],  # noqa: N803
) -> list[types.PromptMessage]:
    """A prompt embedding a text resource."""
    return [
        types.PromptMessage(
            role="user",
            content=types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(
                    uri=resourceUri,
                    mime_type="text/plain",
                    text="Embedded resource content for testing.",
                ),
            ),
        ),
        types.PromptMessage(
            role="user",
            content=types.TextContent(
                type="text", text="Please process the embedded resource above."
            ),
        ),
    ]


@mcp.prompt()
def test_prompt_with_image() -> list[types.PromptMessage]:
    """A prompt with an image."""
    return [
        types.PromptMessage(
            role="user",
            content=types.ImageContent(type="image", data=PNG_BASE64, mime_type="image/png"),
        ),
        types.PromptMessage(
            role="user",
            content=types.TextContent(type="text", text="Please analyze the image above."),
        ),
    ]


@mcp.prompt()
async def test_input_required_result_prompt(ctx: Context) -> list[types.PromptMessage]:
    """Needs context from the user first: ``prompts/get`` answers ``input_required`` before
    the messages."""
    answer = await ctx.elicit_form(
        "What context should the prompt use?",
        {"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]},
    )
    context = _accepted_content(answer).get("context", "(none)")
    return [
        types.PromptMessage(
            role="user",
            content=types.TextContent(type="text", text=f"Use the following context: {context}"),
        )
    ]


# -- completions (completion-complete) ---------------------------------------------------------

_ARG1_SUGGESTIONS = ("paris", "park", "party", "test", "testing", "tested")


@mcp.completion("ref/prompt", "test_prompt_with_arguments")
def complete_prompt_arguments(
    argument_name: str, value: str, context_arguments: dict[str, str]
) -> list[str]:
    """Suggestions for ``arg1``/``arg2`` starting with what was typed."""
    return [word for word in _ARG1_SUGGESTIONS if word.startswith(value.lower())]


@mcp.completion("ref/resource", "test://template/{id}/data")
def complete_template_id(
    argument_name: str, value: str, context_arguments: dict[str, str]
) -> list[str]:
    """Suggestions for the template's ``{id}``."""
    return [candidate for candidate in ("1", "2", "123") if candidate.startswith(value)]
