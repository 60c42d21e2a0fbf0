from django.apps import AppConfig


class DemoConfig(AppConfig):
    name = "project.demo"
    label = "demo"
    verbose_name = "MCP demo tools"

    def ready(self) -> None:
        # Importing the modules registers their @mcp.tool/prompt/resource functions.
        from . import approval_tools, conformance_tools, tools  # noqa: F401
