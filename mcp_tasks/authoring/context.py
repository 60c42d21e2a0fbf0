"""``Context``: what a tool sees of its caller, in a plain call or a background task,
reaching out only through the :class:`ContextBackend` its caller supplies."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Protocol, TypeVar, overload

import mcp_types as types

from ..auth import AccessToken
from ..exceptions import ClientCapabilityError, ToolError
from .approval import DEFAULT_PERMISSION, StaffAudience
from .elicitation import (
    AcceptedElicitation,
    CancelledElicitation,
    DeclinedElicitation,
    ElicitationResult,
)
from .inputs import ElicitInput, Input, Question, RootsInput, SampleInput

T = TypeVar("T")

#: RFC 5424 severities in increasing order, as MCP uses them.
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


def level_allows(level: str, threshold: str | None) -> bool:
    """True when a message at ``level`` passes a client's minimum ``threshold``."""
    if threshold is None:
        return True
    try:
        return LOG_LEVELS.index(level) >= LOG_LEVELS.index(threshold)
    except ValueError:
        return True


class ContextBackend(Protocol):
    """How a ``Context`` talks to the client; implemented by each caller."""

    async def report_progress(
        self, progress: float, total: float | None, message: str | None
    ) -> None: ...

    async def log(self, level: str, data: Any, logger_name: str | None) -> None: ...

    async def ask(self, questions: list[Question]) -> list[dict[str, Any]]:
        """Ask the client (``elicitation/create``, ``sampling/createMessage``,
        ``roots/list``) and return its results, in order."""
        ...

    async def notify(self, method: str, params: dict[str, Any]) -> None: ...

    async def close_stream(self) -> None: ...

    def is_cancelled(self) -> bool:
        """True once the call or task was cancelled (sync: safe from a tool's thread)."""
        ...


class _NoBackend:
    """Backend of a ``Context`` made outside any request or task."""

    def __init__(self, task_id: str | None = None) -> None:
        self.task_id = task_id

    async def report_progress(
        self, progress: float, total: float | None, message: str | None
    ) -> None:
        return None

    async def log(self, level: str, data: Any, logger_name: str | None) -> None:
        return None

    async def ask(self, questions: list[Question]) -> list[dict[str, Any]]:
        if self.task_id is not None:
            raise RuntimeError(
                f"background task {self.task_id} has no task backend (TaskBackend): only the "
                "task worker (manage.py rqworker, or the embedded worker) can ask its client"
            )
        raise RuntimeError(
            "this Context is not attached to a request or a background task, so it cannot "
            "reach a client"
        )

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        return None

    async def close_stream(self) -> None:
        return None

    def is_cancelled(self) -> bool:
        return False


class Context:
    """The caller's context, injected into a tool parameter annotated ``ctx: Context``.

    The same class serves plain calls and background tasks; in a task, the fields are
    restored from the snapshot taken when the task was created."""

    def __init__(
        self,
        *,
        backend: ContextBackend | None = None,
        request_id: str | int | None = None,
        task_id: str | None = None,
        session_id: str | None = None,
        session: Any = None,
        origin_request_id: str | int | None = None,
        protocol_version: str | None = None,
        client_capabilities: Mapping[str, Any] | None = None,
        client_info: Mapping[str, Any] | None = None,
        access_token: AccessToken | None = None,
        user: Any = None,
        lifespan_context: Any = None,
        request_context: Any = None,
        headers: Mapping[str, str] | None = None,
        prepared: Any = None,
        attempt: int = 1,
    ) -> None:
        self._backend: ContextBackend = backend or _NoBackend(task_id)
        self._request_id = request_id
        self._task_id = task_id
        self._session_id = session_id
        self._session = session
        self._origin_request_id = origin_request_id
        #: The protocol version the client speaks (``"2026-07-28"``, ``"2025-11-25"`` …).
        self.protocol_version = protocol_version
        #: The capabilities the client declared (``elicitation``, ``sampling``, ``roots`` …).
        self.client_capabilities: dict[str, Any] = dict(client_capabilities or {})
        #: The client's ``clientInfo`` (``name``, ``version``).
        self.client_info: dict[str, Any] = dict(client_info or {})
        self._access_token = access_token
        #: The Django user the call runs as (a token's user, or the session's), else None.
        self.user = user
        self._lifespan_context = lifespan_context
        self._request_context = request_context
        #: The request headers of ``SNAPSHOT_HEADERS`` (in a task: kept, encrypted, with it).
        self.headers: dict[str, str] = dict(headers or {})
        #: In a task: what the tool's ``TaskConfig.prepare`` returned before the task existed.
        self.prepared = prepared
        #: Which attempt this run is (``TaskConfig(retries=...)`` runs a task again): 1 first.
        self.attempt = attempt

    @property
    def request_id(self) -> str | int | None:
        """JSON-RPC id of the request being served (None in a background task)."""
        return self._request_id

    @property
    def is_background_task(self) -> bool:
        """True when this tool runs as a background task (it has a task ID)."""
        return self._task_id is not None

    @property
    def task_id(self) -> str | None:
        """The background task ID, or None in a plain call. Read-only."""
        return self._task_id

    @property
    def session_id(self) -> str | None:
        """The legacy session's id; in a background task, the id recorded at creation."""
        return self._session_id

    @property
    def origin_request_id(self) -> str | int | None:
        """In a background task: the id of the ``tools/call`` that created it."""
        return self._origin_request_id if self._origin_request_id is not None else self._request_id

    @property
    def session(self) -> Any:
        """The client session (in a background task: the one stored with it); ``RuntimeError`` when
        there is none (no request and no stored session, or a stateless modern client)."""
        if self._session is None:
            raise RuntimeError(
                "session is not available: this context has no request and no stored session"
            )
        return self._session

    @property
    def request_context(self) -> Any:
        """The live request (None in a background task: the request has ended)."""
        return self._request_context

    @property
    def lifespan_context(self) -> Any:
        """What the configured ``LIFESPAN`` yielded; ``{}`` when there is none."""
        return self._lifespan_context if self._lifespan_context is not None else {}

    def get_access_token(self) -> AccessToken | None:
        """The caller's access token, or None when unauthenticated or expired."""
        token = self._access_token
        return None if token is None or token.is_expired() else token

    @property
    def access_token(self) -> AccessToken | None:
        """Same as :meth:`get_access_token`."""
        return self.get_access_token()

    def client_supports_extension(self, extension_id: str) -> bool:
        """True when the client advertised ``extension_id`` in its capabilities."""
        extensions = self.client_capabilities.get("extensions")
        return isinstance(extensions, dict) and extension_id in extensions

    @property
    def is_cancelled(self) -> bool:
        """True once this task was cancelled (or timed out). Async tools get
        ``CancelledError`` at their next ``await``; a sync tool, which nothing can
        interrupt, should look here (or call :meth:`raise_if_cancelled`) in long loops.
        Every ``Context`` call of a cancelled task raises ``CancelledError`` too."""
        return self._backend.is_cancelled()

    def raise_if_cancelled(self) -> None:
        """Raise ``asyncio.CancelledError`` when :attr:`is_cancelled` (sync tools)."""
        if self.is_cancelled:
            raise asyncio.CancelledError()

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Report progress (a task also shows ``message`` as its ``statusMessage``)."""
        await self._backend.report_progress(progress, total, message)

    async def log(self, level: str, data: Any, logger_name: str | None = None) -> None:
        """Send a log message to the client, subject to the client's log level."""
        if level not in LOG_LEVELS:
            raise ValueError(f"unknown log level {level!r}; use one of {', '.join(LOG_LEVELS)}")
        await self._backend.log(level, data, logger_name)

    async def debug(self, data: Any, logger_name: str | None = None) -> None:
        """:meth:`log` at level ``debug``."""
        await self.log("debug", data, logger_name)

    async def info(self, data: Any, logger_name: str | None = None) -> None:
        """:meth:`log` at level ``info``."""
        await self.log("info", data, logger_name)

    async def warning(self, data: Any, logger_name: str | None = None) -> None:
        """:meth:`log` at level ``warning``."""
        await self.log("warning", data, logger_name)

    async def error(self, data: Any, logger_name: str | None = None) -> None:
        """:meth:`log` at level ``error``."""
        await self.log("error", data, logger_name)

    async def send_list_changed(self, kind: str) -> None:
        """Tell clients the ``tools``, ``prompts`` or ``resources`` list changed."""
        if kind not in ("tools", "prompts", "resources"):
            raise ValueError("kind must be 'tools', 'prompts' or 'resources'")
        await self._backend.notify(f"notifications/{kind}/list_changed", {})

    async def close_sse_stream(self) -> None:
        """Legacy era (2025-11-25): close this request's SSE connection now; the client
        reconnects with ``Last-Event-ID`` and receives what follows, the result included.
        Does nothing elsewhere."""
        await self._backend.close_stream()

    async def send_resource_updated(self, uri: str) -> None:
        """Tell subscribed clients that the resource at ``uri`` changed."""
        await self._backend.notify("notifications/resources/updated", {"uri": str(uri)})

    def _require_capability(self, name: str) -> None:
        if name not in self.client_capabilities:
            raise ClientCapabilityError(
                f"the client did not declare the {name!r} capability, so it cannot be asked for it"
            )

    async def gather_inputs(self, inputs: Mapping[str, Input]) -> dict[str, Any]:
        """Ask several things at once; returns ``{key: answer}`` with the same keys.

        Answers: ``ElicitInput`` → Accepted/Declined/CancelledElicitation, ``SampleInput`` →
        ``CreateMessageResult``, ``RootsInput`` → ``list[Root]``. The keys are the request
        keys on the wire (``inputRequests``), so keep them stable across rounds."""
        for item in inputs.values():
            self._require_capability(item.capability)
        questions = [item.question(key) for key, item in inputs.items()]
        answers = await self._backend.ask(questions)
        return {
            key: item.read(answer)
            for (key, item), answer in zip(inputs.items(), answers, strict=True)
        }

    async def _ask_one(self, item: Input, key: str | None) -> Any:
        self._require_capability(item.capability)
        (answer,) = await self._backend.ask([item.question(key)])
        return item.read(answer)

    @overload
    async def elicit(
        self, message: str, response_type: None = None, *, key: str | None = None
    ) -> ElicitationResult: ...

    @overload
    async def elicit(
        self, message: str, response_type: type[T], *, key: str | None = None
    ) -> AcceptedElicitation[T] | DeclinedElicitation | CancelledElicitation: ...

    async def elicit(
        self, message: str, response_type: Any = None, *, key: str | None = None
    ) -> ElicitationResult:
        """Ask the user a question through the client (form mode).

        ``response_type``: ``str``, ``int``, ``float``, ``bool``, an Enum, a ``Literal``, a
        list of Enum/Literal values (multi-select), a pydantic model, a dataclass, a
        TypedDict, or None for a bare confirmation. Returns ``AcceptedElicitation(data=…)``,
        ``DeclinedElicitation()`` or ``CancelledElicitation()``. ``key`` names the request
        on the wire (default: chosen by the server)."""
        result: ElicitationResult = await self._ask_one(ElicitInput(message, response_type), key)
        return result

    async def ask_staff(
        self,
        message: str,
        schema: Any = None,
        *,
        permission: str = DEFAULT_PERMISSION,
        group: str | None = None,
        timeout: float | None = None,
        key: str | None = None,
    ) -> ElicitationResult:
        """Ask staff, not the client: the question waits in the admin for an operator who
        holds ``permission`` (and belongs to ``group``, if given); the client sees the task
        ``working`` ("Waiting for approval by staff") and cannot answer it.

        ``schema``: a response type as for :meth:`elicit`, or a flat ``requestedSchema``
        dict (accepted data is then the content dict). ``timeout``: seconds before the
        question times out (``CancelledElicitation``; None: ``INPUT_TIMEOUT``). Background
        tasks only (``TaskConfig(mode="required")``): a plain call has no one to wait for."""
        if self._task_id is None:
            raise ToolError(
                "ctx.ask_staff needs a background task: declare the tool with "
                "task=TaskConfig(mode='required') so that it never runs as a plain call"
            )
        item = ElicitInput.of(message, schema)
        audience = StaffAudience(permission, group, timeout)
        (answer,) = await self._backend.ask([replace(item.question(key), staff=audience)])
        return item.read(answer)

    async def elicit_form(
        self, message: str, requested_schema: dict[str, Any], *, key: str | None = None
    ) -> ElicitationResult:
        """Ask with a hand-written flat ``requestedSchema``; accepted data is the content dict."""
        item = ElicitInput(message, schema=requested_schema)
        result: ElicitationResult = await self._ask_one(item, key)
        return result

    async def sample(
        self,
        messages: str | list[types.SamplingMessage] | list[dict[str, Any]],
        *,
        system_prompt: str | None = None,
        max_tokens: int = 512,
        temperature: float | None = None,
        stop_sequences: list[str] | None = None,
        model_preferences: types.ModelPreferences | dict[str, Any] | str | list[str] | None = None,
        include_context: str | None = None,
        metadata: dict[str, Any] | None = None,
        key: str | None = None,
    ) -> types.CreateMessageResult:
        """Ask the client's LLM for a completion (``sampling/createMessage``)."""
        item = SampleInput(
            messages,
            system_prompt=system_prompt,
            max_tokens=max_tokens,
            temperature=temperature,
            stop_sequences=stop_sequences,
            model_preferences=model_preferences,
            include_context=include_context,
            metadata=metadata,
        )
        result: types.CreateMessageResult = await self._ask_one(item, key)
        return result

    async def list_roots(self, *, key: str | None = None) -> list[types.Root]:
        """Ask the client for its roots (``roots/list``)."""
        roots: list[types.Root] = await self._ask_one(RootsInput(), key)
        return roots


__all__ = [
    "LOG_LEVELS",
    "Context",
    "ContextBackend",
    "level_allows",
]
