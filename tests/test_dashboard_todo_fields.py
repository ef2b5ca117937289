"""A refused todo edit from the memory page names the field it concerns and a code the page words in its own
language (issue 35 item 3): through the service's `Manager` on service_kit's fakes and fixed clock. The message
stays the tool's (the model still reads it); the page shows `code` beside `field`, with the dialog kept open."""

from __future__ import annotations

import re

import pytest
from service_kit import speaker

from memory import GroupKey, InvalidMemoryInput

G = GroupKey("lark", "oc_group1")
A = speaker("ou_userA", name="小A")
ADMIN = "admin"
APP_JS = __import__("pathlib").Path(__file__).resolve().parents[1] / "views" / "memory_manager" / "app.js"


async def seeded(service) -> dict[str, str]:
    await service.tools.add_todo(A, content="交周报", remind_at="2026-11-23T17:00", due_at="2026-11-23T18:00")
    await service.tools.add_todo(A, content="站会", remind_at="2026-11-24T09:30", recurrence="weekdays")
    return {t.content: t.id for t in await service.store.todos(G)}


@pytest.mark.parametrize(
    ("todo", "change", "code", "field", "params"),
    [
        ("交周报", {"remind_at": "2026-11-23T08:00"}, "time_past", "remind_at", {"when": "2026-11-23 08:00"}),
        ("交周报", {"remind_at": "2020-01-01T09:00"}, "time_past", "remind_at", {"when": "2020-01-01 09:00"}),
        ("交周报", {"remind_at": "2026-11-23T19:00"}, "remind_after_due", "remind_at", {"due": "2026-11-23 18:00"}),
        ("交周报", {"remind_at": "明天下午"}, "time_unreadable", "remind_at", {}),
        ("交周报", {"remind_at": "2026-11-23"}, "time_unreadable", "remind_at", {}),
        ("交周报", {"remind_at": "3000-01-01T09:00"}, "time_out_of_range", "remind_at", {"latest": "2126"}),
        # a recurring todo's time is moved to the rule's next day first: Sunday 08:00 of last week is still past
        ("站会", {"remind_at": "2026-11-15T08:00"}, "time_past", "remind_at", {}),
        ("交周报", {"content": "   "}, "content_empty", "content", {}),
        ("交周报", {"content": "长" * 201}, "content_too_long", "content", {"length": "201", "max": "200"}),
        ("交周报", {"status": "finished"}, "status_invalid", "status", {}),
        ("交周报", {}, "nothing_changed", None, {}),
    ],
)
async def test_a_refused_edit_names_its_field_and_a_code_the_page_words(
    make_service, todo, change, code, field, params
):
    service = make_service()
    ids = await seeded(service)
    before = [t.model_dump() for t in await service.store.todos(G)], len(await service.store.log_entries(G))
    args = {"status": "", "remind_at": "", "content": ""} | change
    with pytest.raises(InvalidMemoryInput) as refused:
        await service.manager.update_todo("lark", G.group_id, ids[todo], **args, user=ADMIN)
    coded = refused.value.coded_message()
    assert refused.value.code == code, coded
    assert refused.value.params.get("field") == field, coded
    for name, value in params.items():
        assert f"|{name}={value}" in coded, coded
    assert ([t.model_dump() for t in await service.store.todos(G)], len(await service.store.log_entries(G))) == before
    await service.stop()


async def test_a_closed_or_unknown_todo_has_its_own_code(make_service, host):
    service = make_service()
    ids = await seeded(service)
    await service.manager.update_todo(
        "lark", G.group_id, ids["交周报"], status="done", remind_at="", content="", user=ADMIN
    )
    with pytest.raises(InvalidMemoryInput) as closed:
        await service.manager.update_todo(
            "lark", G.group_id, ids["交周报"], status="", remind_at="", content="新内容", user=ADMIN
        )
    assert closed.value.code == "todo_closed"
    with pytest.raises(InvalidMemoryInput) as gone:
        await service.manager.update_todo(
            "lark", G.group_id, "nope", status="done", remind_at="", content="", user=ADMIN
        )
    assert gone.value.code == "todo_gone"
    host.platforms.clear()  # the todo's platform is down: no reminder time can be set
    with pytest.raises(InvalidMemoryInput) as unavailable:
        await service.manager.update_todo(
            "lark", G.group_id, ids["站会"], status="", remind_at="2026-11-24T10:00", content="", user=ADMIN
        )
    assert unavailable.value.code == "remind_unavailable" and unavailable.value.params["field"] == "remind_at"
    await service.stop()


async def test_the_tool_reads_the_same_words_as_before(make_service):
    """The codes are for the page: the model's text of a refusal is unchanged (and still names the current time)."""
    service = make_service()
    ids = await seeded(service)
    text = await service.tools.update_todo(A, todo_id=ids["交周报"], remind_at="2020-01-01T09:00")
    assert text.startswith("remind_at 2020-01-01 09:00 已经过去。当前时间：2026年11月23日（周一）09:00"), text
    assert "[time_past" not in text
    await service.stop()


def test_every_code_a_todo_edit_can_carry_is_worded_in_both_languages():
    """Each code the todo rules raise has a wording in the page's Chinese and English strings."""
    source = APP_JS.read_text(encoding="utf-8")
    zh, en = source.split("\n    en: {", 1)
    codes = set()
    for module in ("_todos/rules.py", "_todos/when.py", "_todos/recurrence.py", "_manage/todos.py"):
        text = (APP_JS.parents[2] / "memory" / module).read_text(encoding="utf-8")
        codes |= set(re.findall(r'code="([a-z_]+)"', text))
    codes |= {"content_empty", "content_too_long"}
    assert codes >= {"time_past", "remind_after_due", "todo_closed", "todo_gone", "status_invalid"}
    for code in sorted(codes):
        assert f"err_{code}:" in zh, f"no Chinese wording for {code}"
        assert f"err_{code}:" in en, f"no English wording for {code}"
