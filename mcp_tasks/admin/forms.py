"""Forms of the admin's Answer page: an elicitation ``requestedSchema`` as a Django form
(:func:`elicitation_form`), :class:`SamplingForm` and :class:`RootsForm`. The task service
validates every answer again, against the schema itself."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast
from urllib.parse import urlsplit

from django import forms
from django.contrib.admin import helpers
from django.contrib.admin.utils import quote
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.forms.fields import InvalidJSONInput
from django.http import Http404
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime
from django.utils.html import escape, format_html_join
from django.utils.safestring import SafeString

from .. import jsontext
from ..models import InputRequest

#: ``model`` of the sampling results written in the admin.
ADMIN_MODEL_NAME = "human-via-admin"

Choices = list[tuple[str, str]]

#: The kinds of question the Answer page answers.
ELICIT, SAMPLE, ROOTS = "elicitation/create", "sampling/createMessage", "roots/list"


def _choice_key(value: Any) -> str:
    """The HTML value of an enum member (JSON for anything but a string)."""
    return value if isinstance(value, str) else json.dumps(value)


def enum_options(prop: Mapping[str, Any]) -> list[tuple[Any, str]] | None:
    """``(value, label)`` pairs of a single-select property: ``enum`` (with the legacy
    ``enumNames``) or ``oneOf``/``anyOf`` of ``{const, title}``; None when it is not one."""
    if isinstance(prop.get("enum"), list):
        values = prop["enum"]
        names = prop.get("enumNames")
        if isinstance(names, list) and len(names) == len(values):
            return [(value, str(name)) for value, name in zip(values, names, strict=True)]
        return [(value, str(value)) for value in values]
    for keyword in ("oneOf", "anyOf"):
        options = prop.get(keyword)
        if (
            isinstance(options, list)
            and options
            and all(isinstance(o, dict) and "const" in o for o in options)
        ):
            return [(o["const"], str(o.get("title") or o["const"])) for o in options]
    return None


def _coerce_from(options: list[tuple[Any, str]]) -> Callable[[str], Any]:
    by_key = {_choice_key(value): value for value, _ in options}
    return lambda key: by_key[key]


class AbsoluteURIField(forms.CharField):
    """A string in the JSON Schema ``uri`` format: an absolute URI (any scheme)."""

    widget = forms.URLInput

    def validate(self, value: Any) -> None:
        super().validate(value)
        if value in self.empty_values:
            return
        parts = urlsplit(str(value))
        if not parts.scheme or not (parts.netloc or parts.path) or " " in str(value):
            raise ValidationError(
                "Enter an absolute URI, such as https://example.com/page.", code="invalid"
            )


class StorableJSONField(forms.JSONField):
    """JSON that can be stored and sent: Python's parser also takes ``NaN``, ``Infinity``,
    a NUL (``"\\u0000"``) and a lone surrogate (``"\\ud800"``), which are refused here
    (:mod:`mcp_tasks.jsontext`), as in a client's message, and shown again as typed."""

    def to_python(self, value: Any) -> Any:
        converted = super().to_python(value)
        found = jsontext.find(converted, jsontext.UNSTORABLE)
        if found is not None:
            raise ValidationError(
                "Enter JSON without NaN or Infinity, NUL characters or lone surrogates "
                f"(at {jsontext.describe('', found) or 'the value'}).",
                code="invalid",
            )
        return converted

    def bound_data(self, data: Any, initial: Any) -> Any:
        bound = super().bound_data(data, initial)
        if isinstance(bound, InvalidJSONInput) or self.disabled or data is None:
            return bound
        return (
            bound if jsontext.find(bound, jsontext.UNSTORABLE) is None else InvalidJSONInput(data)
        )


class SelectSeveralField(forms.TypedMultipleChoiceField):
    """A multi-select property (``type: array``) with ``minItems``/``maxItems``."""

    widget = forms.CheckboxSelectMultiple

    def __init__(
        self, *, min_items: int | None = None, max_items: int | None = None, **kwargs: Any
    ) -> None:
        self.min_items, self.max_items = min_items, max_items
        super().__init__(**kwargs)

    def validate(self, value: Any) -> None:
        super().validate(value)
        count = len(value or [])
        if self.min_items is not None and count < self.min_items:
            raise ValidationError(f"Choose at least {self.min_items}.", code="min_items")
        if self.max_items is not None and count > self.max_items:
            raise ValidationError(f"Choose at most {self.max_items}.", code="max_items")


def _string_field(prop: Mapping[str, Any], common: dict[str, Any]) -> forms.Field:
    fmt, initial = prop.get("format"), common.get("initial")
    if fmt == "date":
        common["initial"] = parse_date(initial) if isinstance(initial, str) else initial
        return forms.DateField(
            widget=forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d"), **common
        )
    if fmt == "date-time":
        common["initial"] = parse_datetime(initial) if isinstance(initial, str) else initial
        widget = forms.DateTimeInput(
            attrs={"type": "datetime-local", "step": "1"}, format="%Y-%m-%dT%H:%M:%S"
        )
        zone = f"Time zone: {timezone.get_current_timezone_name()}."
        common["help_text"] = f"{common['help_text']} {zone}" if common.get("help_text") else zone
        return forms.DateTimeField(widget=widget, **common)
    limits: dict[str, Any] = {
        "min_length": prop.get("minLength"),
        "max_length": prop.get("maxLength"),
    }
    if fmt == "email":
        return forms.EmailField(**limits, **common)
    if fmt == "uri":
        return AbsoluteURIField(**limits, **common)
    field = forms.CharField(**limits, **common)
    if isinstance(prop.get("pattern"), str):
        field.validators.append(
            RegexValidator(prop["pattern"], f"Enter a value matching {prop['pattern']}.")
        )
    return field


def _number_field(prop: Mapping[str, Any], common: dict[str, Any]) -> forms.Field:
    limits: dict[str, Any] = {"min_value": prop.get("minimum"), "max_value": prop.get("maximum")}
    if prop.get("type") == "integer":
        return forms.IntegerField(**limits, **common)
    return forms.FloatField(widget=forms.NumberInput(attrs={"step": "any"}), **limits, **common)


def _boolean_field(prop: Mapping[str, Any], common: dict[str, Any], required: bool) -> forms.Field:
    if required or "default" in prop:
        # A checkbox: unchecked is the answer False.
        return forms.BooleanField(**{**common, "required": False})
    # Optional without a default: "no answer" must stay possible.
    return forms.NullBooleanField(
        widget=forms.RadioSelect(choices=[("", "No answer"), ("true", "Yes"), ("false", "No")]),
        **common,
    )


def _multi_field(prop: Mapping[str, Any], common: dict[str, Any]) -> forms.Field | None:
    items = prop.get("items")
    options = enum_options(items) if isinstance(items, Mapping) else None
    if options is None:
        return None
    default = common.pop("initial", None)
    return SelectSeveralField(
        choices=[(_choice_key(value), label) for value, label in options],
        coerce=_coerce_from(options),
        initial=[_choice_key(value) for value in default] if isinstance(default, list) else None,
        min_items=prop.get("minItems"),
        max_items=prop.get("maxItems"),
        **{**common, "required": False},
    )


def _single_field(
    options: list[tuple[Any, str]], common: dict[str, Any], required: bool
) -> forms.Field:
    choices: Choices = [(_choice_key(value), label) for value, label in options]
    if not required or "initial" not in common:
        choices = [("", "---------"), *choices]
    initial = common.pop("initial", None)
    return forms.TypedChoiceField(
        choices=choices,
        coerce=_coerce_from(options),
        empty_value=None,
        initial=None if initial is None else _choice_key(initial),
        **common,
    )


def field_for(
    name: str, prop: Mapping[str, Any], *, required: bool, only: bool = False
) -> forms.Field:
    """The form field for one property of a ``requestedSchema``. ``only``: the property is
    the schema's single one (a scalar question, asked as ``value``), so an untitled one is
    labelled "Answer" ("Yes" for a checkbox)."""
    if prop.get("title"):
        label = prop["title"]
    elif only and name == "value":
        label = "Yes" if prop.get("type") == "boolean" else "Answer"
    else:
        label = name.replace("_", " ").capitalize()
    common: dict[str, Any] = {"label": str(label), "required": required}
    if prop.get("description"):
        common["help_text"] = escape(str(prop["description"]))
    if "default" in prop:
        common["initial"] = prop["default"]
    kind = prop.get("type")
    options = enum_options(prop)
    field: forms.Field | None = None
    if kind == "array":
        field = _multi_field(prop, common)
    elif options is not None:
        field = _single_field(options, common, required)
    elif kind == "string":
        field = _string_field(prop, common)
    elif kind in ("number", "integer"):
        field = _number_field(prop, common)
    elif kind == "boolean":
        field = _boolean_field(prop, common, required)
    # Not an elicitation shape: let staff type JSON.
    return StorableJSONField(**common) if field is None else field


def json_value(value: Any) -> Any:
    """A cleaned value as JSON: a date or datetime in ISO 8601."""
    return value.isoformat() if isinstance(value, dt.date) else value


class ElicitationForm(forms.Form):
    """A form built by :func:`elicitation_form`; ``content()`` gives the answer's content."""

    schema: dict[str, Any] = {}

    def content(self) -> dict[str, Any]:
        """An accepted answer's ``content``, empty optional fields left out (after is_valid())."""
        required = set(self.schema.get("required") or [])
        return {
            name: json_value(value)
            for name, value in self.cleaned_data.items()
            if name in required or value not in (None, "", [])
        }


def elicitation_form(schema: Mapping[str, Any] | None) -> type[ElicitationForm]:
    """A form class for an elicitation ``requestedSchema``."""
    schema = dict(schema or {})
    found = schema.get("properties")
    properties: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    required = set(schema.get("required") or [])
    fields = {
        name: field_for(name, prop, required=name in required, only=len(properties) == 1)
        for name, prop in properties.items()
        if isinstance(prop, Mapping)
    }
    return type("RequestedSchemaForm", (ElicitationForm,), {"schema": schema, **fields})


class SamplingForm(forms.Form):
    """The assistant's reply to a ``sampling/createMessage`` question."""

    text = forms.CharField(
        label="Assistant's reply",
        widget=forms.Textarea(attrs={"rows": 8, "cols": 80}),
        strip=False,
        help_text="Sent to the task as the model's message.",
    )

    def result(self) -> dict[str, Any]:
        """The ``CreateMessageResult`` (call after ``is_valid()``)."""
        return {
            "role": "assistant",
            "content": {"type": "text", "text": self.cleaned_data["text"]},
            "model": ADMIN_MODEL_NAME,
            "stopReason": "endTurn",
        }


class RootsForm(forms.Form):
    """The roots to report for a ``roots/list`` question: one URI a line, then an optional
    name after a space."""

    roots = forms.CharField(
        label="Roots",
        widget=forms.Textarea(
            attrs={"rows": 5, "cols": 80, "placeholder": "file:///home/me/project My project"}
        ),
        required=False,
        help_text="One URI a line, optionally followed by a space and a name.",
    )

    def clean_roots(self) -> list[dict[str, str]]:
        roots: list[dict[str, str]] = []
        for number, line in enumerate(self.cleaned_data["roots"].splitlines(), start=1):
            uri, _, name = line.strip().partition(" ")
            if not uri:
                continue
            if not urlsplit(uri).scheme:
                raise ValidationError(f"Line {number}: {uri!r} is not an absolute URI (file:///…).")
            roots.append({"uri": uri, **({"name": name.strip()} if name.strip() else {})})
        return roots

    def result(self) -> dict[str, Any]:
        """The ``ListRootsResult`` (call after ``is_valid()``)."""
        return {"roots": self.cleaned_data["roots"]}


def answer_url(question: InputRequest) -> str:
    return reverse("admin:mcp_tasks_inputrequest_answer", args=[question.pk])


def task_url(task_id: str) -> str:
    return reverse("admin:mcp_tasks_task_change", args=[quote(task_id)])


def task_links(task_ids: Iterable[str]) -> SafeString:
    """Links to the tasks' pages, each labelled with the start of its id."""
    return format_html_join(", ", '<a href="{}">{}…</a>', ((task_url(i), i[:8]) for i in task_ids))


def question_or_404(object_id: str, not_found: str, **filters: Any) -> InputRequest:
    """The question ``object_id`` with its task and answerer; HTTP 404 ``not_found`` if none."""
    try:
        return InputRequest.objects.select_related("task", "answered_by_user").get(
            pk=int(object_id), **filters
        )
    except (ValueError, InputRequest.DoesNotExist):
        raise Http404(not_found) from None


def answer_adminform(form: forms.Form) -> helpers.AdminForm:
    """``form`` as the admin's fieldset (its helpers are typed for ModelForms only)."""
    return helpers.AdminForm(cast(Any, form), [("Your answer", {"fields": list(form.fields)})], {})


def answer_form(question: InputRequest, data: Any) -> forms.Form:
    """The Answer page's form for this kind of question."""
    params = question.params or {}
    if question.method == SAMPLE:
        return SamplingForm(data)
    if question.method == ROOTS:
        return RootsForm(data)
    if params.get("mode") == "url":
        return forms.Form(data)  # URL-mode elicitation: nothing to fill in
    return elicitation_form(params.get("requestedSchema"))(data, prefix="answer")
