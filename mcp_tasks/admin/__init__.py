"""The operator UI: the task admin, its Answer page and its live pages.

Importing the package registers the ModelAdmins (Django's admin autodiscovery imports
``mcp_tasks.admin``)."""

from . import model_admins  # noqa: F401
