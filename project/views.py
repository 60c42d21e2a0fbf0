"""The landing page, and django-oauth-toolkit's authorization and token endpoints as the
example project serves them to MCP clients:

- a ``resource`` (RFC 8707) other than this MCP server is refused with ``invalid_target``
  at both endpoints, instead of a token that would never work here;
- every authorization response, errors included, carries the issuer (RFC 9207 ``iss``);
- the consent page shows who the client is: its name and the host that vouches for it.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from oauth2_provider import views as oauth2_views
from oauth2_provider.exceptions import OAuthToolkitError
from oauth2_provider.settings import oauth2_settings
from oauthlib.oauth2.rfc6749.errors import CustomOAuth2Error

from mcp_tasks import mcp
from mcp_tasks.conf import get_config


def index(request: HttpRequest) -> HttpResponse:
    mcp_url = request.build_absolute_uri(get_config().PATH)
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


# -- RFC 8707: tokens for this MCP server only ----------------------------------------------


def mcp_resource(request: HttpRequest) -> str:
    """This MCP server's resource URI: ``MCP_TASKS["RESOURCE"]``, or the site's origin plus
    the endpoint's path (what the protected-resource metadata announces)."""
    config = get_config()
    if config.RESOURCE:
        return str(config.RESOURCE)
    return request.build_absolute_uri(str(config.PATH).rstrip("/") or "/")


def foreign_resource(request: HttpRequest, resources: list[str]) -> str | None:
    """The first of ``resources`` that is not this MCP server (a trailing slash does not
    count), or None."""
    ours = mcp_resource(request).rstrip("/")
    return next((res for res in resources if res.rstrip("/") != ours), None)


def _not_ours(resource: str) -> str:
    return f"This server issues tokens for its MCP endpoint only, not for '{resource}'"


class AuthorizationView(oauth2_views.AuthorizationView):
    """DOT's authorization endpoint plus the refusal of foreign resources, ``iss`` on error
    redirects too, and the client's host for the consent page."""

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        foreign = foreign_resource(request, request.GET.getlist("resource"))
        response: HttpResponse
        if foreign is None:
            response = super().get(request, *args, **kwargs)
            return response
        # Only a known client and one of its redirect URIs is told so by redirect.
        try:
            _, credentials = self.validate_authorization_request(request)
        except OAuthToolkitError as refused:
            response = self.error_response(refused, application=None)
            return response
        invalid_target = CustomOAuth2Error(
            error="invalid_target", description=_not_ours(foreign), state=credentials.get("state")
        )
        response = self.error_response(
            OAuthToolkitError(error=invalid_target, redirect_uri=credentials["redirect_uri"]),
            self.get_application(credentials["client_id"]),
        )
        return response

    def form_valid(self, form: Any) -> HttpResponse:
        data = form.cleaned_data
        foreign = foreign_resource(self.request, (data.get("resource") or "").split())
        if foreign is None:
            return super().form_valid(form)  # type: ignore[no-any-return]
        application = self.get_application(data["client_id"])
        error = CustomOAuth2Error(
            error="invalid_target", description=_not_ours(foreign), state=data.get("state")
        )
        if application is None or not application.redirect_uri_allowed(data["redirect_uri"]):
            page: HttpResponse = self.render_to_response({"error": error}, status=400)
            return page
        response: HttpResponse = self.error_response(
            OAuthToolkitError(error=error, redirect_uri=data["redirect_uri"]), application
        )
        return response

    def get_application(self, client_id: str) -> Any:
        from oauth2_provider.models import get_application_model

        return get_application_model().objects.filter(client_id=client_id).first()

    def redirect(self, redirect_to: str, application: Any) -> HttpResponse:
        """Every redirect back to the client carries ``iss`` (RFC 9207 §2: error responses
        too; DOT adds it to successful ones only)."""
        if oauth2_settings.COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS:
            redirect_to = _with_iss(
                redirect_to, oauth2_settings.oauth2_authorization_server_issuer(self.request)
            )
        return super().redirect(redirect_to, application)  # type: ignore[no-any-return]

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context: dict[str, Any] = super().get_context_data(**kwargs)
        application = context.get("application")
        if application is not None:
            context["client_by_document"] = application.registration_source == "cimd"
            vouching = application.client_id if context["client_by_document"] else None
            context["client_host"] = urlsplit(
                vouching or context.get("redirect_uri") or ""
            ).hostname
        return context


def _with_iss(uri: str, issuer: str) -> str:
    """``uri`` with ``iss`` in its query, unless a response parameter is in its fragment
    (DOT then placed it there) or it has one already."""
    parts = urlsplit(uri)
    query = parse_qsl(parts.query, keep_blank_values=True)
    if parts.fragment or any(key == "iss" for key, _ in query):
        return uri
    return urlunsplit(parts._replace(query=urlencode([*query, ("iss", issuer)])))


class TokenView(oauth2_views.TokenView):
    """DOT's token endpoint; a ``resource`` other than this MCP server is ``invalid_target``
    (RFC 8707 §2, HTTP 400 as for the other errors of RFC 6749 §5.2)."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        foreign = foreign_resource(request, request.POST.getlist("resource"))
        if foreign is not None:
            body = {"error": "invalid_target", "error_description": _not_ours(foreign)}
            return JsonResponse(body, status=400, headers={"Cache-Control": "no-store"})
        return super().post(request, *args, **kwargs)  # type: ignore[no-any-return]
