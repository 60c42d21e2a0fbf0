"""The operator UI. Importing it (admin autodiscovery) registers the ModelAdmins and hides
django-rq's admin entry in embedded mode."""

from . import model_admins, question_admin  # noqa: F401
from .rq_dashboard import follow_embedded_mode

follow_embedded_mode()  # django-rq's entry, when its admin module was imported before this one
