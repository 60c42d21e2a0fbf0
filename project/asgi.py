"""ASGI entry point: ``daphne project.asgi:application`` (and ``manage.py runserver``)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
django_application = get_asgi_application()  # sets Django up before mcp_tasks is imported

from mcp_tasks.asgi import mcp_application  # noqa: E402

# Routes MCP_TASKS["PATH"] (default /mcp) to mcp_tasks; everything else goes to Django.
application = mcp_application(django_application)
