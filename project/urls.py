"""URLs of the example project: the landing page, the admin and django-rq's pages.

``/mcp`` is not here: it is routed in ``project/asgi.py``, before Django's URL resolver.
"""

from django.contrib import admin
from django.contrib.staticfiles.urls import staticfiles_urlpatterns
from django.urls import include, path

from project import views

urlpatterns = [
    path("", views.index, name="index"),
    # django-rq 4 also mounts its dashboard inside the admin (/admin/django_rq/dashboard/);
    # this include keeps the classic URLs. Its views require a staff login. Before "admin/".
    path("admin/django-rq/", include("django_rq.urls")),
    path("admin/", admin.site.urls),
]
# With DEBUG, serve static files (the admin's CSS and JS) when daphne runs project.asgi
# directly, as the live-server tests do; `runserver` serves them itself. Empty without DEBUG.
urlpatterns += staticfiles_urlpatterns()
