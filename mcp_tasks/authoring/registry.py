"""The registry of tools, prompts, resources and completions, and the ``@mcp`` decorators
(knowing nothing of HTTP, Channels or rq). Authoring code registers with :data:`mcp`::

    from mcp_tasks import mcp, Context

    @mcp.tool(task=True)
    async def build_report(quarter: str, ctx: Context) -> str: ...
"""

from __future__ import annotations

import functools
import inspect
import math
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import mcp_types as types
from django.core.exceptions import ImproperlyConfigured
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata, func_metadata

from ..auth.permissions import OPEN, Access
from ..core import LONGEST_SECONDS, is_count
from ..core.jsonrpc import wire_dict
from .approval import Approval
from .context import Context
from .retries import Retry

F = TypeVar("F", bound=Callable[..., Any])

TaskMode = Literal["forbidden", "optional", "required"]

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_\-.]{1,128}$")
#: The longest ``TaskConfig(poll_interval=...)``: what a task row holds in milliseconds.
LONGEST_POLL_INTERVAL = (2**31 - 1) / 1000


def _is_seconds(value: object, longest: float = math.inf) -> bool:
    """Whether ``value`` is a finite number of seconds from 0 to ``longest`` (no bool)."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and 0 <= value <= longest
        and value < math.inf
    )


@dataclass(frozen=True)
class TaskConfig:
    """How a tool runs as a background task.

    ``mode``: ``forbidden`` (never a task), ``optional`` (a task when the client supports
    tasks, else inline) or ``required`` (only as a task). ``ttl`` (seconds) is how long the
    task and its result are kept; ``poll_interval`` (seconds) is suggested to pollers;
    ``queue`` is the rq queue; ``timeout`` (seconds) is the rq job timeout; ``prepare``
    gathers input before the task is created (see the attribute).

    ``concurrency``: at most that many of the tool's tasks run at once across all workers
    (with ``concurrency_key``, per value of that argument); the others wait, holding no
    worker slot. ``retries``: a :class:`~mcp_tasks.authoring.retries.Retry` for transient failures.

    ``inline_window`` (seconds): how long a call from a client without the tasks extension
    waits for the task before it answers with a handle (None: ``INLINE_WINDOW``; 0: a
    handle at once). ``for_all_clients``: whether such a client's call runs as a task with a
    handle (None: ``TASKS_FOR_ALL_CLIENTS``; False: as without it, an ``optional`` tool
    inline and a ``required`` one refused with ``-32021``)."""

    mode: TaskMode = "optional"
    ttl: float | None = None
    poll_interval: float | None = None
    queue: str | None = None
    timeout: int | None = None
    #: ``async def prepare(ctx, **arguments) -> JSON`` run inline at ``tools/call`` before the
    #: task exists; it may ``await ctx.elicit(...)`` (MRTR rounds on the call itself). Its
    #: return value is stored with the task and read by the tool as ``ctx.prepared``.
    prepare: Callable[..., Any] | None = None
    concurrency: int | None = None
    concurrency_key: str | None = None
    retries: Retry | None = None
    inline_window: float | None = None
    for_all_clients: bool | None = None

    def __post_init__(self) -> None:
        if self.mode not in ("forbidden", "optional", "required"):
            raise ImproperlyConfigured(
                f"TaskConfig(mode={self.mode!r}): use 'forbidden', 'optional' or 'required'"
            )
        if self.concurrency is not None and not is_count(self.concurrency):
            raise ImproperlyConfigured(
                f"TaskConfig(concurrency={self.concurrency!r}): use an int >= 1, or None"
            )
        if self.concurrency_key is not None and self.concurrency is None:
            raise ImproperlyConfigured(
                "TaskConfig(concurrency_key=...) needs concurrency=N: how many run at once per value"
            )
        if self.inline_window is not None and not _is_seconds(self.inline_window):
            raise ImproperlyConfigured(
                f"TaskConfig(inline_window={self.inline_window!r}): use seconds >= 0, or None"
            )
        if self.ttl is not None and not _is_seconds(self.ttl, LONGEST_SECONDS):
            raise ImproperlyConfigured(
                f"TaskConfig(ttl={self.ttl!r}): use seconds >= 0 (at most a century), or None"
            )
        if self.poll_interval is not None and not _is_seconds(
            self.poll_interval, LONGEST_POLL_INTERVAL
        ):
            raise ImproperlyConfigured(
                f"TaskConfig(poll_interval={self.poll_interval!r}): use seconds >= 0 (at most "
                f"{LONGEST_POLL_INTERVAL:g}), or None"
            )
        if self.for_all_clients not in (None, True, False):
            raise ImproperlyConfigured(
                f"TaskConfig(for_all_clients={self.for_all_clients!r}): use True, False or None"
            )
        if self.retries is not None and not isinstance(self.retries, Retry):
            raise ImproperlyConfigured(
                f"TaskConfig(retries={self.retries!r}): use mcp_tasks.Retry(...)"
            )

    @classmethod
    def coerce(cls, task: bool | TaskMode | TaskConfig | None) -> TaskConfig:
        """``True`` → optional, ``False``/``None`` → forbidden, a mode string → that mode."""
        if isinstance(task, TaskConfig):
            return task
        if task is None or task is False:
            return cls(mode="forbidden")
        if task is True:
            return cls(mode="optional")
        if isinstance(task, str):
            return cls(mode=task)
        raise ImproperlyConfigured(f"task={task!r}: use a bool, a mode string or a TaskConfig")


def _context_parameter(fn: Callable[..., Any]) -> str | None:
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # unresolvable annotations: fall back to the raw ones
        hints = dict(getattr(fn, "__annotations__", {}))
    for name, annotation in hints.items():
        candidates = (annotation, *typing.get_args(annotation))
        if any(inspect.isclass(c) and issubclass(c, Context) for c in candidates):
            return name
    return None


def _is_async(fn: Callable[..., Any]) -> bool:
    while hasattr(fn, "__wrapped__"):
        if inspect.iscoroutinefunction(fn):
            return True
        fn = fn.__wrapped__
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - callable objects
    )


def _check_concurrency_key(tool: ToolSpec) -> None:
    """``TaskConfig(concurrency_key=...)`` names one of the tool's arguments."""
    key = tool.task.concurrency_key
    if key is not None and key not in tool.input_schema.get("properties", {}):
        raise ImproperlyConfigured(
            f"tool {tool.name!r}: TaskConfig(concurrency_key={key!r}) names no argument of "
            f"the tool (it has: {', '.join(tool.input_schema.get('properties', {})) or 'none'})"
        )


def _listed(out: dict[str, Any], **optional: Any) -> dict[str, Any]:
    """A listing's ``out`` with its ``optional`` fields that are not None, in order."""
    return out | {key: value for key, value in optional.items() if value is not None}


def _icons(icons: list[types.Icon] | None) -> list[dict[str, Any]] | None:
    return [wire_dict(icon) for icon in icons] if icons else None


def _description(fn: Callable[..., Any], description: str | None) -> str:
    return description if description is not None else inspect.cleandoc(fn.__doc__ or "")


@dataclass(kw_only=True)
class _Registered:
    """What every registered tool, prompt and resource has."""

    fn: Callable[..., Any]
    name: str
    title: str | None
    description: str
    context_param: str | None
    is_async: bool
    icons: list[types.Icon] | None = None
    meta: dict[str, Any] | None = None
    #: Who may list and call it (see :mod:`mcp_tasks.auth.permissions`).
    access: Access = OPEN


@dataclass
class ToolSpec(_Registered):
    """A registered tool."""

    #: Builds the tool's argument and output models (pydantic) on first use: a process that
    #: never calls or lists the tool never pays for them (check E021 builds them all).
    build_metadata: Callable[[], FuncMetadata]
    task: TaskConfig
    annotations: types.ToolAnnotations | None = None
    #: A hand-written JSON Schema (2020-12) advertised verbatim and validated with jsonschema.
    raw_input_schema: dict[str, Any] | None = None
    #: An operator approves each task of it before it runs (:mod:`.approval`).
    approval: Approval | None = None

    @functools.cached_property
    def metadata(self) -> FuncMetadata:
        """The argument and output models, built once, at first use."""
        return self.build_metadata()

    @functools.cached_property
    def input_schema(self) -> dict[str, Any]:
        """The ``inputSchema`` (built once; treat it as read-only)."""
        if self.raw_input_schema is not None:
            return self.raw_input_schema
        return self.metadata.arg_model.model_json_schema(by_alias=True)

    def definition(self, *, task_support: bool = False) -> dict[str, Any]:
        """The tool as listed by ``tools/list``."""
        return _listed(
            {"name": self.name, "description": self.description, "inputSchema": self.input_schema},
            title=self.title or None,
            outputSchema=self.metadata.output_schema,
            annotations=None if self.annotations is None else wire_dict(self.annotations),
            icons=_icons(self.icons),
            _meta=self.meta or None,
            execution={"taskSupport": self.task.mode} if task_support else None,
        )


@dataclass
class PromptSpec(_Registered):
    """A registered prompt."""

    metadata: FuncMetadata

    @functools.cached_property
    def _argument_list(self) -> list[dict[str, Any]]:
        schema = self.metadata.arg_model.model_json_schema(by_alias=True)
        required = set(schema.get("required", []))
        return [
            {"name": name, "required": name in required}
            | ({"description": prop["description"]} if prop.get("description") else {})
            for name, prop in schema.get("properties", {}).items()
        ]

    def arguments(self) -> list[dict[str, Any]]:
        """The prompt's arguments as ``prompts/list`` shows them."""
        return [dict(argument) for argument in self._argument_list]

    def definition(self) -> dict[str, Any]:
        return _listed(
            {"name": self.name, "arguments": self.arguments()},
            description=self.description or None,
            title=self.title or None,
            icons=_icons(self.icons),
            _meta=self.meta or None,
        )


_TEMPLATE_VAR = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass
class ResourceSpec(_Registered):
    """A registered resource (fixed URI) or resource template (URI with ``{vars}``)."""

    uri: str
    mime_type: str | None
    annotations: types.Annotations | None = None
    variables: list[str] = field(default_factory=list)
    pattern: re.Pattern[str] | None = None

    @property
    def is_template(self) -> bool:
        return self.pattern is not None

    def match(self, uri: str) -> dict[str, str] | None:
        """Template variables when ``uri`` matches this template (or the fixed URI)."""
        if self.pattern is None:
            return {} if uri == self.uri else None
        found = self.pattern.fullmatch(uri)
        return found.groupdict() if found else None

    def definition(self) -> dict[str, Any]:
        return _listed(
            {"name": self.name, "uriTemplate" if self.is_template else "uri": self.uri},
            description=self.description or None,
            title=self.title or None,
            mimeType=self.mime_type or None,
            icons=_icons(self.icons),
            annotations=None if self.annotations is None else wire_dict(self.annotations),
            _meta=self.meta or None,
        )


CompletionFn = Callable[..., Any]


class MCPServer:
    """A registry of MCP tools, prompts and resources. Use the module-level :data:`mcp`."""

    def __init__(self) -> None:
        self.tools: dict[str, ToolSpec] = {}
        self.prompts: dict[str, PromptSpec] = {}
        self.resources: dict[str, ResourceSpec] = {}
        self.templates: dict[str, ResourceSpec] = {}
        self.completions: dict[tuple[str, str], CompletionFn] = {}

    @staticmethod
    def _check_unique(
        kind: str, registry: dict[Any, Any], key: Any, fn: Callable[..., Any]
    ) -> None:
        existing = registry.get(key)
        if existing is None:
            return
        same = getattr(existing.fn, "__module__", None) == getattr(
            fn, "__module__", None
        ) and getattr(existing.fn, "__qualname__", None) == getattr(fn, "__qualname__", None)
        if not same:  # a module imported twice re-registers the same function: harmless
            raise ImproperlyConfigured(
                f"two {kind}s are named {key!r} ({existing.fn.__module__}."
                f"{existing.fn.__qualname__} and {fn.__module__}.{fn.__qualname__}); "
                "give one of them another name with name=..."
            )

    def tool(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        annotations: types.ToolAnnotations | dict[str, Any] | None = None,
        task: bool | TaskMode | TaskConfig | None = None,
        structured_output: bool | None = None,
        icons: list[types.Icon] | None = None,
        meta: dict[str, Any] | None = None,
        input_schema: dict[str, Any] | None = None,
        permissions: list[str] | None = None,
        scopes: list[str] | None = None,
        approval: Approval | None = None,
    ) -> Callable[[F], F]:
        """Register a function as a tool: ``@mcp.tool()`` (with the parentheses).

        ``name`` defaults to the function's name and ``description`` to its docstring;
        ``title``, ``annotations`` (``ToolAnnotations`` or a dict such as
        ``{"readOnlyHint": True}``), ``icons`` and ``meta`` (``_meta``) are listed as given.
        ``structured_output``: None derives structured output from the return annotation;
        True or False forces it on or off.

        ``task``: ``True`` lets it run as a background task (mode ``optional``), a mode
        string or a :class:`TaskConfig` says more; None or False: never a task.

        ``approval``: each task waits for an operator's decision in the admin before it
        runs (:class:`~mcp_tasks.authoring.approval.Approval`); such a tool runs only as a
        task, so ``task=True`` (or no ``task``) means ``mode="required"`` here.

        ``input_schema`` replaces the schema derived from the type hints: it is advertised as
        written and arguments are validated against it (JSON Schema 2020-12), then passed to
        the function as keyword arguments. ``permissions`` (Django, for users) and ``scopes``
        (OAuth, for bearer tokens) restrict who sees and calls it."""
        if callable(name):
            raise TypeError("use @mcp.tool() with parentheses")

        def decorator(fn: F) -> F:
            tool_name = name or fn.__name__
            if not _TOOL_NAME.match(tool_name):
                raise ImproperlyConfigured(
                    f"tool name {tool_name!r} is invalid: use 1-128 letters, digits, '_', '-', '.'"
                )
            self._check_unique("tool", self.tools, tool_name, fn)
            if approval is not None and not isinstance(approval, Approval):
                raise ImproperlyConfigured(
                    f"tool {tool_name!r}: approval={approval!r}: use mcp_tasks.Approval(...)"
                )
            if approval is not None and (task is True or task is None):
                task_config = TaskConfig(mode="required")
            else:
                task_config = TaskConfig.coerce(task)
            context_param = _context_parameter(fn)
            skip = [context_param] if context_param else []
            if input_schema is not None:
                from jsonschema.validators import validator_for  # type: ignore[import-untyped]

                validator_for(input_schema).check_schema(input_schema)
                skip = list(inspect.signature(fn).parameters)
            notes = (
                types.ToolAnnotations.model_validate(annotations)
                if isinstance(annotations, dict)
                else annotations
            )
            spec = ToolSpec(
                fn=fn,
                name=tool_name,
                title=title,
                description=_description(fn, description),
                build_metadata=functools.partial(
                    func_metadata, fn, skip_names=skip, structured_output=structured_output
                ),
                context_param=context_param,
                is_async=_is_async(fn),
                task=task_config,
                annotations=notes,
                icons=icons,
                meta=meta,
                raw_input_schema=input_schema,
                access=Access.of(f"tool {tool_name!r}", permissions, scopes),
                approval=approval,
            )
            _check_concurrency_key(spec)
            if approval is not None:
                approval.check_tool(tool_name, list(spec.input_schema.get("properties", {})))
            self.tools[tool_name] = spec
            return fn

        return decorator

    def prompt(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        icons: list[types.Icon] | None = None,
        meta: dict[str, Any] | None = None,
        permissions: list[str] | None = None,
        scopes: list[str] | None = None,
    ) -> Callable[[F], F]:
        """Register a function that renders a prompt (``permissions``/``scopes`` as for
        tools)."""
        if callable(name):
            raise TypeError("use @mcp.prompt() with parentheses")

        def decorator(fn: F) -> F:
            prompt_name = name or fn.__name__
            self._check_unique("prompt", self.prompts, prompt_name, fn)
            context_param = _context_parameter(fn)
            self.prompts[prompt_name] = PromptSpec(
                fn=fn,
                name=prompt_name,
                title=title,
                description=_description(fn, description),
                metadata=func_metadata(fn, skip_names=[context_param] if context_param else []),
                context_param=context_param,
                is_async=_is_async(fn),
                icons=icons,
                meta=meta,
                access=Access.of(f"prompt {prompt_name!r}", permissions, scopes),
            )
            return fn

        return decorator

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        icons: list[types.Icon] | None = None,
        annotations: types.Annotations | None = None,
        meta: dict[str, Any] | None = None,
        permissions: list[str] | None = None,
        scopes: list[str] | None = None,
    ) -> Callable[[F], F]:
        """Register a resource; a URI with ``{variables}`` registers a resource template
        whose variables are passed to the function as keyword arguments
        (``permissions``/``scopes`` as for tools)."""

        def decorator(fn: F) -> F:
            variables = _TEMPLATE_VAR.findall(uri)
            context_param = _context_parameter(fn)
            params = set(inspect.signature(fn).parameters) - {context_param}
            if set(variables) != params:
                raise ImproperlyConfigured(
                    f"resource {uri!r}: the URI variables {sorted(variables)} must match the "
                    f"parameters of {fn.__qualname__} {sorted(params)}"
                )
            parts = _TEMPLATE_VAR.split(uri)  # literals and variable names, in turn
            regex = "".join(
                f"(?P<{part}>[^/?#]+)" if i % 2 else re.escape(part) for i, part in enumerate(parts)
            )
            pattern = re.compile(regex) if variables else None
            registry = self.templates if variables else self.resources
            self._check_unique("resource", registry, uri, fn)
            registry[uri] = ResourceSpec(
                fn=fn,
                uri=uri,
                name=name or fn.__name__,
                title=title,
                description=_description(fn, description),
                mime_type=mime_type,
                context_param=context_param,
                is_async=_is_async(fn),
                icons=icons,
                annotations=annotations,
                meta=meta,
                variables=variables,
                pattern=pattern,
                access=Access.of(f"resource {uri!r}", permissions, scopes),
            )
            return fn

        return decorator

    def completion(self, ref_type: str, ref: str) -> Callable[[F], F]:
        """Register argument completions for ``("ref/prompt", name)`` or
        ``("ref/resource", uri_template)``. The function gets ``argument_name``, ``value``
        and ``context_arguments`` and returns a list of strings."""
        if ref_type not in ("ref/prompt", "ref/resource"):
            raise ImproperlyConfigured("ref_type must be 'ref/prompt' or 'ref/resource'")

        def decorator(fn: F) -> F:
            self.completions[(ref_type, ref)] = fn
            return fn

        return decorator

    def find_resource(self, uri: str) -> tuple[ResourceSpec, dict[str, str]] | None:
        """The resource or template serving ``uri`` and the template variables."""
        if uri in self.resources:
            return self.resources[uri], {}
        for template in self.templates.values():
            variables = template.match(uri)
            if variables is not None:
                return template, variables
        return None


#: The registry the ``/mcp`` endpoint serves.
mcp = MCPServer()
