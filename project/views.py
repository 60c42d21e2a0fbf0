"""The landing page: how to connect an MCP client to this server."""

from __future__ import annotations

import json

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from mcp_tasks import mcp
from mcp_tasks.conf import get_config


def index(request: HttpRequest) -> HttpResponse:
    mcp_url = request.build_absolute_uri(get_config()["PATH"])
    client_config = {"mcpServers": {"django-mcp-tasks": {"type": "http", "url": mcp_url}}}
    vscode_config = {"servers": {"django-mcp-tasks": {"type": "http", "url": mcp_url}}}
    tools = sorted(mcp.tools.values(), key=lambda spec: spec.name)
    return render(
        request,
        "index.html",
        {
            "mcp_url": mcp_url,
            "client_config": json.dumps(client_config, indent=2),
            "vscode_config": json.dumps(vscode_config, indent=2),
            "tools": tools,
        },
    )
