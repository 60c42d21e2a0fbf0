"""The admin's Answer forms: requestedSchema → Django form → JSON content."""

from __future__ import annotations

import datetime as dt
from typing import Any, cast

import pytest
from django import forms
from django.utils import timezone

from mcp_tasks.admin.forms import (
    ElicitationForm,
    RootsForm,
    SamplingForm,
    elicitation_form,
    enum_options,
)


def schema(required: list[str] | None = None, **properties: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = {"type": "object", "properties": properties}
    if required is not None:
        result["required"] = required
    return result


def bound(requested: dict[str, Any], data: dict[str, Any]) -> ElicitationForm:
    return elicitation_form(requested)(data)


def form_of(requested: dict[str, Any]) -> ElicitationForm:
    return elicitation_form(requested)()


def choices_of(form: forms.Form, name: str) -> list[tuple[Any, Any]]:
    field = form.fields[name]
    assert isinstance(field, forms.ChoiceField)
    return list(cast(Any, field.choices))


def content_of(requested: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    form = bound(requested, data)
    assert form.is_valid(), form.errors
    return form.content()


def errors_of(requested: dict[str, Any], data: dict[str, Any], name: str) -> list[str]:
    form = bound(requested, data)
    assert not form.is_valid()
    return [str(error) for error in form.errors[name]]


# -- strings ----------------------------------------------------------------------------------


def test_string_becomes_a_text_field_with_title_and_description() -> None:
    form = elicitation_form(
        schema(name={"type": "string", "title": "Your name", "description": "As <b>shown</b>"})
    )()
    field = form.fields["name"]
    assert isinstance(field, forms.CharField)
    assert field.label == "Your name"
    assert field.help_text == "As &lt;b&gt;shown&lt;/b&gt;"


def test_untitled_property_is_labelled_from_its_name() -> None:
    form = elicitation_form(schema(first_name={"type": "string"}))()
    assert form.fields["first_name"].label == "First name"


def test_string_min_and_max_length_are_enforced() -> None:
    requested = schema(["code"], code={"type": "string", "minLength": 3, "maxLength": 5})
    assert content_of(requested, {"code": "abcd"}) == {"code": "abcd"}
    assert "at least 3" in errors_of(requested, {"code": "ab"}, "code")[0]
    assert "at most 5" in errors_of(requested, {"code": "abcdef"}, "code")[0]


def test_string_pattern_is_enforced() -> None:
    requested = schema(["zip"], zip={"type": "string", "pattern": "^[0-9]{5}$"})
    assert content_of(requested, {"zip": "75001"}) == {"zip": "75001"}
    assert errors_of(requested, {"zip": "7500A"}, "zip")


def test_email_format_uses_an_email_field() -> None:
    requested = schema(["email"], email={"type": "string", "format": "email"})
    assert isinstance(elicitation_form(requested)().fields["email"], forms.EmailField)
    assert content_of(requested, {"email": "ada@example.com"}) == {"email": "ada@example.com"}
    assert errors_of(requested, {"email": "not-an-email"}, "email")


@pytest.mark.parametrize(
    "uri", ["https://example.com/a?b=c", "file:///home/me/project", "urn:isbn:0451450523"]
)
def test_uri_format_accepts_absolute_uris_of_any_scheme(uri: str) -> None:
    requested = schema(["link"], link={"type": "string", "format": "uri"})
    assert content_of(requested, {"link": uri}) == {"link": uri}


@pytest.mark.parametrize("uri", ["example.com/page", "/relative/path", "has space://x"])
def test_uri_format_rejects_relative_references(uri: str) -> None:
    requested = schema(["link"], link={"type": "string", "format": "uri"})
    assert errors_of(requested, {"link": uri}, "link") == [
        "Enter an absolute URI, such as https://example.com/page."
    ]


def test_date_format_gives_an_iso_date() -> None:
    requested = schema(["day"], day={"type": "string", "format": "date"})
    field = elicitation_form(requested)().fields["day"]
    assert isinstance(field, forms.DateField)
    assert field.widget.input_type == "date"
    assert content_of(requested, {"day": "2026-03-14"}) == {"day": "2026-03-14"}
    assert errors_of(requested, {"day": "14th of March"}, "day")


def test_date_time_format_gives_an_iso_date_time_with_offset() -> None:
    requested = schema(["at"], at={"type": "string", "format": "date-time"})
    field = elicitation_form(requested)().fields["at"]
    assert field.widget.input_type == "datetime-local"
    assert f"Time zone: {timezone.get_current_timezone_name()}." in field.help_text
    value = content_of(requested, {"at": "2026-03-14T15:09:26"})["at"]
    # Read in the current time zone, sent with its offset.
    assert dt.datetime.fromisoformat(value) == timezone.make_aware(
        dt.datetime(2026, 3, 14, 15, 9, 26)
    )
    assert dt.datetime.fromisoformat(value).utcoffset() is not None
    assert errors_of(requested, {"at": "soon"}, "at")


def test_optional_empty_string_is_left_out() -> None:
    assert content_of(schema(note={"type": "string"}), {"note": ""}) == {}


def test_required_string_must_be_given() -> None:
    assert errors_of(schema(["note"], note={"type": "string"}), {"note": "  "}, "note") == [
        "This field is required."
    ]


# -- numbers ----------------------------------------------------------------------------------


def test_integer_with_minimum_and_maximum() -> None:
    requested = schema(["age"], age={"type": "integer", "minimum": 0, "maximum": 150})
    assert isinstance(elicitation_form(requested)().fields["age"], forms.IntegerField)
    assert content_of(requested, {"age": "42"}) == {"age": 42}
    assert "greater than or equal to 0" in errors_of(requested, {"age": "-1"}, "age")[0]
    assert "less than or equal to 150" in errors_of(requested, {"age": "151"}, "age")[0]
    assert errors_of(requested, {"age": "4.5"}, "age")


def test_number_accepts_decimals_within_limits() -> None:
    requested = schema(["score"], score={"type": "number", "minimum": 0.5, "maximum": 10})
    field = elicitation_form(requested)().fields["score"]
    assert isinstance(field, forms.FloatField)
    assert field.widget.attrs["step"] == "any"
    assert content_of(requested, {"score": "9.75"}) == {"score": 9.75}
    assert errors_of(requested, {"score": "0.25"}, "score")
    assert errors_of(requested, {"score": "10.5"}, "score")


# -- booleans ---------------------------------------------------------------------------------


def test_required_boolean_is_a_checkbox_and_unchecked_means_false() -> None:
    requested = schema(["confirm"], confirm={"type": "boolean"})
    assert isinstance(elicitation_form(requested)().fields["confirm"], forms.BooleanField)
    assert content_of(requested, {"confirm": "on"}) == {"confirm": True}
    assert content_of(requested, {}) == {"confirm": False}


def test_scalar_boolean_question_is_labelled_yes() -> None:
    form = elicitation_form(schema(["value"], value={"type": "boolean"}))()
    assert form.fields["value"].label == "Yes"


def test_scalar_question_is_labelled_answer() -> None:
    form = elicitation_form(schema(["value"], value={"type": "string"}))()
    assert form.fields["value"].label == "Answer"


def test_optional_boolean_without_default_can_stay_unanswered() -> None:
    requested = schema(subscribe={"type": "boolean"})
    assert isinstance(elicitation_form(requested)().fields["subscribe"], forms.NullBooleanField)
    assert content_of(requested, {"subscribe": ""}) == {}
    assert content_of(requested, {"subscribe": "true"}) == {"subscribe": True}
    assert content_of(requested, {"subscribe": "false"}) == {"subscribe": False}


def test_optional_boolean_with_default_is_a_checkbox_checked_by_default() -> None:
    form = elicitation_form(schema(verified={"type": "boolean", "default": True}))()
    assert isinstance(form.fields["verified"], forms.BooleanField)
    assert form["verified"].initial is True
    assert "checked" in str(form["verified"])


# -- single-select enums ----------------------------------------------------------------------


def test_plain_enum_is_a_select_of_its_values() -> None:
    requested = schema(["color"], color={"type": "string", "enum": ["red", "green"]})
    field = elicitation_form(requested)().fields["color"]
    assert isinstance(field, forms.TypedChoiceField)
    assert choices_of(form_of(requested), "color") == [
        ("", "---------"),
        ("red", "red"),
        ("green", "green"),
    ]
    assert content_of(requested, {"color": "green"}) == {"color": "green"}
    assert errors_of(requested, {"color": "blue"}, "color")
    assert errors_of(requested, {"color": ""}, "color") == ["This field is required."]


def test_titled_enum_one_of_shows_titles_and_returns_consts() -> None:
    requested = schema(
        ["size"],
        size={
            "type": "string",
            "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}],
        },
    )
    assert choices_of(form_of(requested), "size")[1:] == [("s", "Small"), ("l", "Large")]
    assert content_of(requested, {"size": "l"}) == {"size": "l"}


def test_legacy_enum_names_label_the_values() -> None:
    requested = schema(opt={"type": "string", "enum": ["o1", "o2"], "enumNames": ["One", "Two"]})
    assert choices_of(elicitation_form(requested)(), "opt") == [
        ("", "---------"),
        ("o1", "One"),
        ("o2", "Two"),
    ]


def test_enum_names_of_the_wrong_length_are_ignored() -> None:
    assert enum_options({"enum": ["a", "b"], "enumNames": ["A"]}) == [("a", "a"), ("b", "b")]


def test_required_enum_with_default_has_no_blank_choice_and_preselects_it() -> None:
    requested = schema(
        ["status"], status={"type": "string", "enum": ["active", "inactive"], "default": "active"}
    )
    form = elicitation_form(requested)()
    assert [key for key, _ in choices_of(form, "status")] == ["active", "inactive"]
    assert form["status"].initial == "active"


def test_optional_enum_left_blank_is_left_out() -> None:
    assert content_of(schema(color={"type": "string", "enum": ["red"]}), {"color": ""}) == {}


def test_non_string_enum_values_keep_their_json_type() -> None:
    requested = schema(["n"], n={"enum": [1, 2, None]})
    assert content_of(requested, {"n": "2"}) == {"n": 2}
    assert content_of(requested, {"n": "null"}) == {"n": None}


# -- multi-select -----------------------------------------------------------------------------


def test_multi_select_of_plain_enum_items_returns_a_list() -> None:
    requested = schema(
        ["tags"], tags={"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}}
    )
    field = elicitation_form(requested)().fields["tags"]
    assert isinstance(field.widget, forms.CheckboxSelectMultiple)
    assert content_of(requested, {"tags": ["a", "c"]}) == {"tags": ["a", "c"]}
    assert errors_of(requested, {"tags": ["z"]}, "tags")


def test_multi_select_of_titled_any_of_items() -> None:
    requested = schema(
        tags={
            "type": "array",
            "items": {
                "anyOf": [{"const": "v1", "title": "First"}, {"const": "v2", "title": "Second"}]
            },
        }
    )
    assert choices_of(elicitation_form(requested)(), "tags") == [
        ("v1", "First"),
        ("v2", "Second"),
    ]
    assert content_of(requested, {"tags": ["v2"]}) == {"tags": ["v2"]}


def test_multi_select_min_and_max_items() -> None:
    items = {"type": "string", "enum": ["a", "b", "c"]}
    requested = schema(
        ["tags"], tags={"type": "array", "items": items, "minItems": 1, "maxItems": 2}
    )
    assert errors_of(requested, {}, "tags") == ["Choose at least 1."]
    assert errors_of(requested, {"tags": ["a", "b", "c"]}, "tags") == ["Choose at most 2."]
    assert content_of(requested, {"tags": ["b"]}) == {"tags": ["b"]}


def test_required_multi_select_may_be_an_empty_list() -> None:
    requested = schema(["tags"], tags={"type": "array", "items": {"enum": ["a"]}})
    assert content_of(requested, {}) == {"tags": []}


def test_optional_multi_select_left_empty_is_left_out() -> None:
    assert content_of(schema(tags={"type": "array", "items": {"enum": ["a"]}}), {}) == {}


def test_multi_select_default_checks_its_values() -> None:
    requested = schema(tags={"type": "array", "items": {"enum": ["a", "b"]}, "default": ["b"]})
    form = elicitation_form(requested)()
    assert form["tags"].initial == ["b"]


# -- defaults, required, odd shapes -----------------------------------------------------------


def test_defaults_of_every_primitive_become_initial_values() -> None:
    requested = schema(
        name={"type": "string", "default": "John Doe"},
        age={"type": "integer", "default": 30},
        score={"type": "number", "default": 95.5},
        day={"type": "string", "format": "date", "default": "2026-01-02"},
        at={"type": "string", "format": "date-time", "default": "2026-01-02T03:04:05Z"},
    )
    with timezone.override("UTC"):
        form = elicitation_form(requested)()
        rendered_at = str(form["at"])
    assert form["name"].initial == "John Doe"
    assert form["age"].initial == 30
    assert form["score"].initial == 95.5
    assert form["day"].initial == dt.date(2026, 1, 2)
    assert 'value="2026-01-02T03:04:05"' in rendered_at


def test_required_list_decides_which_fields_are_required() -> None:
    form = elicitation_form(schema(["a"], a={"type": "string"}, b={"type": "string"}))()
    assert form.fields["a"].required is True
    assert form.fields["b"].required is False


def test_unknown_property_shape_falls_back_to_json() -> None:
    requested = schema(["extra"], extra={"type": "object"})
    assert isinstance(elicitation_form(requested)().fields["extra"], forms.JSONField)
    assert content_of(requested, {"extra": '{"a": 1}'}) == {"extra": {"a": 1}}


def test_empty_or_missing_schema_gives_a_form_without_fields() -> None:
    for requested in (None, {}, {"type": "object", "properties": {}}):
        form = elicitation_form(requested)({})
        assert form.fields == {}
        assert form.is_valid()
        assert form.content() == {}


def test_prefix_keeps_property_names_apart_from_the_page_s_own_names() -> None:
    form = elicitation_form(schema(["_accept"], _accept={"type": "string"}))(
        {"answer-_accept": "x"}, prefix="answer"
    )
    assert form.is_valid()
    assert form.content() == {"_accept": "x"}


# -- sampling and roots -----------------------------------------------------------------------


def test_sampling_form_builds_an_assistant_message() -> None:
    form = SamplingForm({"text": "  Hello there  "})
    assert form.is_valid()
    assert form.result() == {
        "role": "assistant",
        "content": {"type": "text", "text": "  Hello there  "},
        "model": "human-via-admin",
        "stopReason": "endTurn",
    }


def test_sampling_form_needs_text() -> None:
    assert not SamplingForm({"text": ""}).is_valid()


def test_roots_form_reads_one_uri_a_line_with_optional_names() -> None:
    form = RootsForm({"roots": "file:///home/me/project My project\n\nfile:///tmp\n"})
    assert form.is_valid(), form.errors
    assert form.result() == {
        "roots": [{"uri": "file:///home/me/project", "name": "My project"}, {"uri": "file:///tmp"}]
    }


def test_roots_form_rejects_a_relative_path() -> None:
    form = RootsForm({"roots": "home/me"})
    assert not form.is_valid()
    assert "not an absolute URI" in form.errors["roots"][0]


def test_roots_form_may_report_no_roots() -> None:
    form = RootsForm({"roots": ""})
    assert form.is_valid()
    assert form.result() == {"roots": []}
