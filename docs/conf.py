"""Sphinx configuration of the documentation site (``nox -s docs`` builds it).

Markdown pages (MyST), the Furo theme, and the API reference from the docstrings (autodoc).
The build runs with warnings as errors (``-W``) and nitpicky cross-references (``-n``): a
link to a page, a heading or a Python object that does not exist fails it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import django
from django.conf import settings

DOCS = Path(__file__).resolve().parent
sys.path[:0] = [str(DOCS.parent), str(DOCS / "_ext")]

# autodoc imports the package, and parts of it (the pytest plugin, the management commands)
# need Django set up: the smallest project that installs the app.
settings.configure(
    INSTALLED_APPS=[
        "django.contrib.admin",
        "django.contrib.auth",
        "django.contrib.contenttypes",
        "django.contrib.sessions",
        "django.contrib.messages",
        "django_rq",
        "oauth2_provider",
        "mcp_tasks",
    ],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
    USE_TZ=True,
)
django.setup()

import mcp_tasks  # noqa: E402

project = "django-mcp-tasks"
author = "The django-mcp-tasks authors"
copyright = "the django-mcp-tasks authors"  # noqa: A001 - Sphinx's name
release = mcp_tasks.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.viewcode",
    "mcp_tasks_docs",
]
source_suffix = {".md": "markdown"}
root_doc = "index"
# pypi.md is the package's long description (PyPI), not a page of the site.
exclude_patterns = ["_build", "pypi.md"]

# MyST: every heading down to ### is a link target (page.md#a-heading).
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

# autodoc: the public API as users import it; type hints in the signature.
autodoc_default_options = {"member-order": "bysource"}
autodoc_typehints = "signature"
# One parameter a line once a signature is longer than this.
python_maximum_signature_line_length = 90
autoclass_content = "class"

# Every cross-reference must resolve. Types of other packages are not documented here (no
# inventories are fetched: the build needs no network), so references to them are ignored.
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(mcp_types|mcp|django|pydantic|httpx|rq|redis|channels|asgiref)(\..*)?"),
    (r"py:.*", r"(collections\.abc|typing|typing_extensions|contextlib|datetime|enum)\..*"),
    (r"py:.*", r"(_?pytest|types|asyncio|concurrent)(\..*)?"),
    # mcp_tasks.testing's type aliases, as its signatures name them (its page lists them).
    (r"py:class", r"Message|Answer|OnProgress"),
    # Type variables of generic signatures (``F``, ``T``).
    (r"py:class", r"mcp_tasks\..*\.[A-Z]"),
]

html_theme = "furo"
html_title = "django-mcp-tasks"
html_static_path: list[str] = []
