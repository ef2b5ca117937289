"""Issue 35 item 10, the service's part: what people read after an action is in words. The CSV export's header and
values are in the page's language (the machine names without one); importing the CSV, or any file that is not JSON,
is refused in an operator's words, never with Python's JSON message; a bulk edit's history says what it changed
besides the text (type, importance), on the page (`changes`) and in `/memory history`."""

from __future__ import annotations

import csv
import io
import json

import pytest
from service_kit import speaker

from memory import GroupKey, InvalidMemoryInput
from memory._admin import history_text
from memory._manage.csv_export import BOM, COLUMNS, HEADERS
from memory._manage.history import history_page
from memory._manage.transfer.reading import BROKEN_JSON, NOT_JSON, OWN_CSV

G = GroupKey("lark", "oc_group1")
A = speaker("ou_userA", name="小A")
ADMIN = "admin"
PYTHON_WORDS = ("Expecting", "line 1 column", "char 0", "Input should", "JSONDecodeError")


async def _csv(service, lang: str) -> list[list[str]]:
    download = await service.manager.export("lark", G.group_id, "", decrypted=False, csv=True, lang=lang)
    data = b"".join([chunk async for chunk in download.chunks]).decode("utf-8")
    assert data.startswith(BOM), "Excel reads UTF-8 only with the BOM, in every language"
    return list(csv.reader(io.StringIO(data.removeprefix(BOM), newline="")))


async def _seeded(make_service):
    service = make_service()
    await service.tools.save_memory(A, memory_type="fact", content="住在上海")
    await service.tools.save_memory(A, memory_type="preference", content="=喜欢喝美式咖啡")
    return service


async def test_the_csv_speaks_the_page_s_language_and_keeps_machine_names_without_one(make_service):
    service = await _seeded(make_service)
    zh = await _csv(service, "zh")
    assert zh[0] == ["群", "成员", "范围", "类型", "内容", "重要度", "来源", "创建时间", "更新时间", "附件"]
    row = next(r for r in zh[1:] if r[4] == "住在上海")
    assert (row[2], row[3], row[6]) == ("本群个人", "事实", "成员要求")
    assert next(r for r in zh[1:] if r[4] == "'=喜欢喝美式咖啡")[3] == "偏好", "still no formula"
    en = await _csv(service, "en-US")  # the dashboard's locale as it comes
    assert tuple(en[0]) == HEADERS["en"] and en[0][0] == "Group"
    assert next(r for r in en[1:] if r[4] == "住在上海")[2:4] == ["Member", "Fact"]
    for lang in ("", "fr"):  # a script calling the route, a language the page does not speak
        raw = await _csv(service, lang)
        assert tuple(raw[0]) == COLUMNS
        assert next(r for r in raw[1:] if r[4] == "住在上海")[2:4] == ["member", "fact"]
    await service.stop()


async def test_importing_the_csv_or_any_non_json_file_is_refused_in_words(make_service):
    service = await _seeded(make_service)
    for lang in ("zh", "en", ""):
        sheet = "\n".join(",".join(row) for row in await _csv(service, lang))
        for content in (BOM + sheet, sheet):
            with pytest.raises(InvalidMemoryInput) as refused:
                await service.manager.preview_import(content, "lark")
            assert str(refused.value) == OWN_CSV
    with pytest.raises(InvalidMemoryInput) as refused:
        await service.manager.preview_import("你好，这是一份会议纪要", "lark")
    assert str(refused.value) == NOT_JSON and "LivingMemory" in NOT_JSON
    truncated = '{"format": "astrbot_plugin_user_memory.export",\n "groups": ['
    with pytest.raises(InvalidMemoryInput) as refused:
        await service.manager.preview_import(truncated, "lark")
    assert str(refused.value) == BROKEN_JSON.format(line=2, column=13)
    wrong = {"group_id": "oc_x", "platform": "lark", "users": {"ou_a": {"memories": [{"id": "m1", "type": "fact"}]}}}
    with pytest.raises(InvalidMemoryInput) as refused:
        await service.manager.preview_import(json.dumps(wrong), "lark")
    assert "缺少" in str(refused.value) and "content" in str(refused.value)
    for message in (OWN_CSV, NOT_JSON, str(refused.value)):
        assert not any(word in message for word in PYTHON_WORDS), message
    await service.stop()


async def test_a_bulk_edit_s_history_says_what_changed_besides_the_text(make_service):
    service = await _seeded(make_service)
    page = await service.manager.memories("lark", G.group_id, _query())
    refs = {m["content"]: {"scope": m["scope"], "owner": m["owner"], "id": m["id"]} for m in page["items"]}
    await service.manager.bulk_edit(
        "lark",
        G.group_id,
        [refs["住在上海"], refs["=喜欢喝美式咖啡"]],
        memory_type="instruction",
        importance=0.9,
        scope="",
        member="",
        confirm=False,
        user=ADMIN,
    )
    items = (await history_page(service.store, G, limit=2, before=None))["items"]
    by_content = {item["new"]["content"]: item for item in items}
    assert by_content["住在上海"]["changes"] == [
        {"field": "type", "old": "fact", "new": "instruction"},
        {"field": "importance", "old": 0.5, "new": 0.9},
    ]
    assert by_content["=喜欢喝美式咖啡"]["changes"][0] == {"field": "type", "old": "preference", "new": "instruction"}
    added = (await history_page(service.store, G, limit=1, before=items[-1]["id"]))["items"][0]
    assert added["op"] == "add" and added["changes"] == [], "an addition changed nothing besides its text"
    text = await history_text(service.store, G)
    assert "住在上海：类型 事实 → 指令，重要度 0.5 → 0.9" in text, text
    assert "住在上海 → 住在上海" not in text
    await service.stop()


async def test_an_edit_of_the_text_and_the_type_says_both(make_service):
    service = await _seeded(make_service)
    page = await service.manager.memories("lark", G.group_id, _query())
    memory = next(m for m in page["items"] if m["content"] == "住在上海")
    ref = {"scope": memory["scope"], "owner": memory["owner"], "id": memory["id"]}
    await service.manager.edit(
        "lark", G.group_id, ref, content="住在杭州", memory_type="preference", importance=0.5, user=ADMIN
    )
    newest = (await history_page(service.store, G, limit=1, before=None))["items"][0]
    assert newest["changes"] == [{"field": "type", "old": "fact", "new": "preference"}]
    assert "住在上海 → 住在杭州（类型 事实 → 偏好）" in await history_text(service.store, G)
    await service.stop()


def _query():
    from memory import Query

    return Query.parse(text="", scope="", type="", source="", member="", sort="", page=1, page_size=50)
