"""What a tool can ask the client (a question, a sampling request, its roots): each input
knows its wire request and how to read the answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mcp_types as types

from ..core.jsonrpc import wire_dict
from ..exceptions import ToolError
from .approval import StaffAudience
from .elicitation import ElicitationResult, ElicitationSpec, elicitation_spec


@dataclass(frozen=True)
class Question:
    """One request to the client: ``key`` (None: chosen by the server), method, params;
    ``staff``: who may answer when only staff may (``ctx.ask_staff``, approvals)."""

    key: str | None
    method: str
    params: dict[str, Any]
    staff: StaffAudience | None = None

    @property
    def key_prefix(self) -> str:
        """How a key the server chooses for it begins (``elicit-…``, ``sample-…``)."""
        return KEY_PREFIXES.get(self.method, "input")


KEY_PREFIXES = {
    "elicitation/create": "elicit",
    "sampling/createMessage": "sample",
    "roots/list": "roots",
}


@dataclass(frozen=True)
class ElicitInput:
    """Ask the user: ``response_type`` as for ``ctx.elicit``, or a raw ``schema`` dict."""

    message: str
    response_type: Any = None
    schema: dict[str, Any] | None = None

    capability = "elicitation"

    @classmethod
    def of(cls, message: str, schema: Any) -> ElicitInput:
        """``schema``: a response type, or a flat ``requestedSchema`` dict."""
        return cls(message, schema=schema) if isinstance(schema, dict) else cls(message, schema)

    def spec(self) -> ElicitationSpec:
        if self.schema is not None:  # hand-written: the accepted content is read as a dict
            return ElicitationSpec(dict, self.schema, wrapped=False)
        return elicitation_spec(self.response_type)

    def question(self, key: str | None) -> Question:
        params = {
            "mode": "form",
            "message": self.message,
            "requestedSchema": self.spec().requested_schema,
        }
        return Question(key, "elicitation/create", params)

    def read(self, answer: dict[str, Any]) -> ElicitationResult:
        try:
            return self.spec().parse(answer)
        except ValueError as exc:
            raise ToolError(str(exc)) from exc


@dataclass(frozen=True)
class SampleInput:
    """Ask the client's LLM (``sampling/createMessage``)."""

    messages: str | list[types.SamplingMessage] | list[dict[str, Any]]
    system_prompt: str | None = None
    max_tokens: int = 512
    temperature: float | None = None
    stop_sequences: list[str] | None = None
    model_preferences: types.ModelPreferences | dict[str, Any] | str | list[str] | None = None
    include_context: str | None = None
    metadata: dict[str, Any] | None = None

    capability = "sampling"

    def question(self, key: str | None) -> Question:
        params: dict[str, Any] = {
            "messages": _sampling_messages(self.messages),
            "maxTokens": self.max_tokens,
        }
        optional = {
            "systemPrompt": self.system_prompt,
            "temperature": self.temperature,
            "stopSequences": self.stop_sequences or None,
            "includeContext": self.include_context,
            "metadata": self.metadata,
        }
        params.update({name: value for name, value in optional.items() if value is not None})
        if self.model_preferences is not None:
            params["modelPreferences"] = _model_preferences(self.model_preferences)
        return Question(key, "sampling/createMessage", params)

    def read(self, answer: dict[str, Any]) -> types.CreateMessageResult:
        try:
            return types.CreateMessageResult.model_validate(answer)
        except Exception as exc:
            raise ToolError(f"the client's sampling answer is not a valid result: {exc}") from exc


@dataclass(frozen=True)
class RootsInput:
    """Ask for the client's roots (``roots/list``)."""

    capability = "roots"

    def question(self, key: str | None) -> Question:
        return Question(key, "roots/list", {})

    def read(self, answer: dict[str, Any]) -> list[types.Root]:
        try:
            return types.ListRootsResult.model_validate(answer).roots
        except Exception as exc:
            raise ToolError(f"the client's roots answer is not valid: {exc}") from exc


Input = ElicitInput | SampleInput | RootsInput


def _sampling_messages(
    messages: str | list[types.SamplingMessage] | list[dict[str, Any]],
) -> list[dict[str, Any]]:
    if isinstance(messages, str):
        return [{"role": "user", "content": {"type": "text", "text": messages}}]
    return [
        wire_dict(message) if isinstance(message, types.SamplingMessage) else dict(message)
        for message in messages
    ]


def _model_preferences(prefs: Any) -> dict[str, Any]:
    if isinstance(prefs, str):
        return {"hints": [{"name": prefs}]}
    if isinstance(prefs, list):
        return {"hints": [{"name": name} for name in prefs]}
    if isinstance(prefs, types.ModelPreferences):
        return wire_dict(prefs)
    return dict(prefs)
