"""Sphinx helpers of this site.

``django-command``: the usage and options of a management command, read from its parser::

    ```{django-command} mcp_tasks_call
    ```

In signatures: a dataclass field's ``default_factory`` shown as its call (``scopes=list()``),
where Python's ``<factory>`` would break Sphinx's parsing of the whole signature; and no
private parameter (``_transport``).
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from typing import Any

from django.core.management import load_command_class
from django.core.management.base import CommandParser
from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx.application import Sphinx
from sphinx.util.inspect import stringify_signature


class DjangoCommand(Directive):
    """The command's own arguments, as ``manage.py COMMAND --help`` prints them, without
    Django's common options (``--settings``, ``--verbosity`` …)."""

    required_arguments = 1
    has_content = False

    def run(self) -> list[nodes.Node]:
        name = self.arguments[0]
        command = load_command_class("mcp_tasks", name)
        parser = CommandParser(
            prog=f"python manage.py {name}",
            description=str(command.help),
            add_help=False,
        )
        command.add_arguments(parser)
        text = parser.format_help().rstrip()
        block = nodes.literal_block(text, text)
        block["language"] = "text"
        return [block]


def show_factories(
    app: Sphinx,
    what: str,
    name: str,
    obj: Any,
    options: Any,
    signature: str | None,
    return_annotation: str | None,
) -> tuple[str | None, str | None] | None:
    """``<factory>`` defaults of a dataclass's signature as the calls that make them, and
    a class's private parameters left out."""
    if not signature:
        return None
    if what == "class" and re.search(r"[(,] ?_\w", signature):
        init = inspect.signature(obj.__init__)
        public = [p for p in list(init.parameters.values())[1:] if not p.name.startswith("_")]
        signature = stringify_signature(
            init.replace(parameters=public, return_annotation=inspect.Signature.empty)
        )
    if "<factory>" in signature and dataclasses.is_dataclass(obj):
        factories = iter(
            f"{getattr(item.default_factory, '__name__', 'factory')}()"
            for item in dataclasses.fields(obj)
            if item.default_factory is not dataclasses.MISSING
        )
        signature = re.sub("<factory>", lambda _: next(factories), signature)
    return signature, return_annotation


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("django-command", DjangoCommand)
    app.connect("autodoc-process-signature", show_factories)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
