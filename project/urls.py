"""URLs of the example project: the landing page, sign-in (OAuth), the admin, django-rq's pages
and the metrics.

``/mcp`` is not here: it is routed in ``project/asgi.py``, before Django's URL resolver.
"""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.staticfiles.urls import staticfiles_urlpatterns
from django.urls import include, path
from oauth2_provider import views as oauth2_views

from mcp_tasks.metrics import view as metrics_view
from project import views

# django-oauth-toolkit: RFC 8414 metadata at the origin's root (the issuer is the origin);
# authorize, token, revoke and dynamic client registration (RFC 7591) under /o/. Authorize and
# token are DOT's views as project/views.py adapts them (RFC 8707 invalid_target, RFC 9207
# iss on errors too, the client's host on the consent page). Client ID Metadata Documents
# need no URL: DOT fetches the client's own (OAUTH2_PROVIDER["CIMD_ENABLED"]).
_oauth = [
    path(
        ".well-known/oauth-authorization-server",
        oauth2_views.OAuthServerMetadataView.as_view(),
        name="oauth-server-metadata",
    ),
    path("o/authorize/", views.AuthorizationView.as_view(), name="authorize"),
    path("o/token/", views.TokenView.as_view(), name="token"),
    path("o/revoke_token/", oauth2_views.RevokeTokenView.as_view(), name="revoke-token"),
    path("o/register/", oauth2_views.DynamicClientRegistrationView.as_view(), name="dcr-register"),
    path(
        "o/register/<str:client_id>/",
        oauth2_views.DynamicClientRegistrationManagementView.as_view(),
        name="dcr-register-management",
    ),
]

urlpatterns = [
    path("", views.index, name="index"),
    path("", include((_oauth, "oauth2_provider"))),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    # django-rq 4 also mounts its dashboard inside the admin (/admin/django_rq/dashboard/);
    # this include keeps the classic URLs. Its views require a staff login. Before "admin/".
    path("admin/django-rq/", include("django_rq.urls")),
    path("admin/", admin.site.urls),
    # Prometheus metrics (404 unless MCP_TASKS["METRICS"]; README "Metrics"). Keep it off the
    # public internet: METRICS_TOKEN, or a proxy that only lets the scraper's network in.
    path("metrics", metrics_view.metrics, name="metrics"),
]
# With DEBUG, serve static files (the admin's CSS and JS) when daphne runs project.asgi
# directly, as the live-server tests do; `runserver` serves them itself. Empty without DEBUG.
urlpatterns += staticfiles_urlpatterns()
