import pytest

from memory import InvalidMemoryInput
from memory._errors import MemoryLimitReached
from memory._models import MemoryType
from memory._errors import PermissionDenied
from memory._rules.operations import SaveKind, forget, save


def _save(memories, memory_type, content, replace_id="", now=1.0, max_count=20, max_length=200):
    return save(
        memories,
        memory_type=memory_type,
        content=content,
        replace_id=replace_id,
        now=now,
        max_count=max_count,
        max_length=max_length,
    )


def build(*items):
    memories = []
    for i, (memory_type, content) in enumerate(items):
        memories, _ = _save(memories, memory_type, content, now=float(i))
    return memories


def test_save_adds_a_clean_memory():
    memories, outcome = _save([], "preference", "  希望被称呼为\n「老王」 ")
    assert outcome.kind is SaveKind.ADDED
    assert [m.content for m in memories] == ["希望被称呼为 「老王」"]
    assert memories[0].type is MemoryType.PREFERENCE


@pytest.mark.parametrize(
    ("memory_type", "content", "message"),
    [
        ("hobby", "x", "memory_type"),
        (None, "x", "memory_type"),
        (3, "x", "memory_type"),
        ("fact", "", "不能为空"),
        ("fact", " \n\t ", "不能为空"),
        ("fact", 42, "必须是文本"),
        ("fact", ["a"], "必须是文本"),
        ("fact", "长" * 201, "过长"),
    ],
)
def test_invalid_input_is_rejected(memory_type, content, message):
    with pytest.raises(InvalidMemoryInput, match=message):
        _save([], memory_type, content)


def test_type_is_case_insensitive():
    memories, _ = _save([], " Instruction ", "回复我时用英文")
    assert memories[0].type is MemoryType.INSTRUCTION


def test_same_content_updates_instead_of_duplicating():
    memories = build(("fact", "是这个项目的后端负责人"))
    again, outcome = _save(memories, "fact", "是这个项目的后端负责人。", now=9.0)
    assert outcome.kind is SaveKind.DUPLICATE
    assert len(again) == 1 and again[0].updated_at == 9.0 and again[0].id == memories[0].id


def test_english_duplicates_ignore_case_and_width():
    memories = build(("instruction", "Reply in English"))
    again, outcome = _save(memories, "instruction", "ｒｅｐｌｙ in english!")
    assert outcome.kind is SaveKind.DUPLICATE and len(again) == 1


def test_replace_id_updates_in_place():
    memories = build(("preference", "希望被称呼为「小王」"), ("fact", "是产品经理"))
    target = memories[0]
    updated, outcome = _save(memories, "preference", "希望被称呼为「王总」", replace_id=target.short_id, now=5.0)
    assert outcome.kind is SaveKind.REPLACED
    assert [m.content for m in updated] == ["希望被称呼为「王总」", "是产品经理"]
    assert updated[0].id == target.id and updated[0].created_at == target.created_at and updated[0].updated_at == 5.0


def test_unknown_or_bad_replace_id_is_an_error():
    memories = build(("fact", "是产品经理"))
    for bad in ("deadbeef", "ab", 123):
        with pytest.raises(InvalidMemoryInput):
            _save(memories, "fact", "是设计师", replace_id=bad)


def test_new_nickname_replaces_the_old_one():
    memories = build(("preference", "希望被称呼为「小王」"), ("fact", "是产品经理"))
    updated, outcome = _save(memories, "preference", "希望被叫做王总")
    assert outcome.kind is SaveKind.SLOT_REPLACED
    assert [m.content for m in updated] == ["希望被叫做王总", "是产品经理"]


def test_new_reply_language_replaces_the_old_one():
    memories = build(("instruction", "回复我时用英文"))
    updated, outcome = _save(memories, "instruction", "回复我时用中文")
    assert outcome.kind is SaveKind.SLOT_REPLACED and len(updated) == 1


def test_facts_never_replace_by_topic():
    memories = build(("fact", "会说日语"))
    updated, outcome = _save(memories, "fact", "会说英语")
    assert outcome.kind is SaveKind.ADDED and len(updated) == 2


def test_limit_reached_is_an_error_not_a_silent_drop():
    memories = build(*[("fact", f"事实 {i}") for i in range(3)])
    with pytest.raises(MemoryLimitReached):
        _save(memories, "fact", "第四条", max_count=3)
    replaced, _ = _save(memories, "fact", "第四条", replace_id=memories[0].id, max_count=3)
    assert len(replaced) == 3
    refreshed, outcome = _save(memories, "fact", "事实 1", max_count=3)
    assert outcome.kind is SaveKind.DUPLICATE


def test_forget_all():
    memories = build(("fact", "a"), ("fact", "b"))
    left, outcome = forget(memories, "all")
    assert left == [] and len(outcome.deleted) == 2
    for word in ("全部", "ALL", "所有", "一切", "everything", "*", "“all”"):
        assert forget(memories, word)[0] == []


@pytest.mark.parametrize("blank", ["", " ", "\u200b", "\u3000", "\ufeff\u200d", "\n\t", '""', "「」"])
def test_a_blank_or_invisible_target_deletes_nothing(blank):
    memories = build(("fact", "a"), ("fact", "b"))
    with pytest.raises(InvalidMemoryInput, match="target 不能为空"):
        forget(memories, blank)


def test_forget_has_no_default_target():
    with pytest.raises(TypeError):
        forget(build(("fact", "a")))  # type: ignore[call-arg]


def test_forget_by_id_and_unknown_id():
    memories = build(("fact", "a"), ("fact", "b"))
    left, outcome = forget(memories, f"[{memories[1].short_id}]")
    assert [m.content for m in left] == ["a"] and outcome.deleted == [memories[1]]
    with pytest.raises(InvalidMemoryInput, match="没有 id"):
        forget(memories, "0123456789")


def test_forget_by_topic_description():
    memories = build(
        ("preference", "在这个群叫我老王"), ("fact", "是这个项目的后端负责人"), ("instruction", "回复我时用英文")
    )
    left, outcome = forget(memories, "关于称呼的")
    assert [m.content for m in outcome.deleted] == ["在这个群叫我老王"]
    assert len(left) == 2
    left, outcome = forget(memories, "关于职业的")
    assert [m.content for m in outcome.deleted] == ["是这个项目的后端负责人"]


def test_forget_by_words_of_the_memory():
    memories = build(("fact", "喜欢猫"), ("fact", "周末常去爬山"))
    left, outcome = forget(memories, "爬山那件事")
    assert [m.content for m in outcome.deleted] == ["周末常去爬山"]


def test_ambiguous_description_deletes_nothing_and_returns_candidates():
    memories = build(("fact", "下周三去上海出差"), ("fact", "下周五去上海看展"), ("fact", "喜欢猫"))
    left, outcome = forget(memories, "去上海的那条")
    assert left == memories and outcome.deleted == []
    assert {m.content for m in outcome.ambiguous} == {"下周三去上海出差", "下周五去上海看展"}


def test_plural_description_deletes_every_match():
    memories = build(("fact", "下周三去上海出差"), ("fact", "下周五去上海看展"), ("fact", "喜欢猫"))
    left, outcome = forget(memories, "所有关于上海的")
    assert [m.content for m in left] == ["喜欢猫"] and len(outcome.deleted) == 2


def test_unmatched_description_deletes_nothing():
    memories = build(("fact", "喜欢猫"))
    left, outcome = forget(memories, "关于股票的")
    assert left == memories and outcome.deleted == [] and outcome.ambiguous == []


def test_english_description():
    memories = build(("preference", "Call me Tom"), ("fact", "Works on the payment service"))
    left, outcome = forget(memories, "the nickname")
    assert [m.content for m in outcome.deleted] == ["Call me Tom"]


def test_forget_rejects_non_text_target():
    with pytest.raises(InvalidMemoryInput):
        forget(build(("fact", "a")), 5)


# -- changing only what the caller may change -------------------------------------------------------
def _others(memories):
    """A `may_change` that refuses every memory already in `memories` (they were added by someone else)."""
    theirs = {m.id for m in memories}
    return lambda memory: memory.id not in theirs


def test_a_duplicate_of_a_memory_the_caller_may_not_change_leaves_it_alone():
    theirs = build(("fact", "项目 A 下周三上线"))
    left, outcome = save(
        theirs,
        memory_type="instruction",
        content="项目A 下周三上线！",
        now=9.0,
        max_count=20,
        max_length=200,
        may_change=_others(theirs),
    )
    assert outcome.kind is SaveKind.EXISTS and left == theirs and outcome.memory == theirs[0]
    assert left[0].type is MemoryType.FACT and left[0].updated_at == 0.0


def test_replace_id_of_a_memory_the_caller_may_not_change_is_refused():
    theirs = build(("fact", "群规禁止发广告"))
    with pytest.raises(PermissionDenied, match="添加者"):
        save(
            theirs,
            memory_type="fact",
            content="群规允许发广告",
            replace_id=theirs[0].id,
            now=9.0,
            max_count=20,
            max_length=200,
            may_change=_others(theirs),
        )


def test_replace_never_removes_a_twin_the_caller_may_not_change():
    theirs = build(("fact", "群规禁止发广告"))
    mine, _ = save(theirs, memory_type="fact", content="周五聚餐", now=2.0, max_count=20, max_length=200)
    may = _others(theirs)
    with pytest.raises(PermissionDenied):
        save(
            mine,
            memory_type="fact",
            content="群规禁止发广告",
            replace_id=mine[1].id,
            now=9.0,
            max_count=20,
            max_length=200,
            may_change=may,
        )


def test_single_value_slots_can_be_turned_off_and_never_take_a_memory_the_caller_may_not_change():
    group = build(("preference", "新人入群请先改群昵称"))
    _, outcome = save(
        group, memory_type="preference", content="群里的外号统一叫做花名", now=9.0, max_count=20, max_length=200
    )
    assert outcome.kind is SaveKind.SLOT_REPLACED  # the two share the 称呼 slot
    off, outcome = save(
        group,
        memory_type="preference",
        content="群里的外号统一叫做花名",
        now=9.0,
        max_count=20,
        max_length=200,
        single_value_slots=False,
    )
    assert outcome.kind is SaveKind.ADDED and len(off) == 2
    refused, outcome = save(
        group,
        memory_type="preference",
        content="群里的外号统一叫做花名",
        now=9.0,
        max_count=20,
        max_length=200,
        may_change=_others(group),
    )
    assert outcome.kind is SaveKind.ADDED and refused[0] == group[0]


def test_cached_duplicate_keys_follow_edits_and_removals():
    """The duplicate check keeps each stored content's key (memory._text.stored_key): after a memory is edited,
    its old text is no longer a duplicate and its new text is; after it is removed, its text saves as new."""
    from memory._text import stored_key

    memories = build(("fact", "在上海工作"), ("fact", "喜欢喝咖啡"))
    again, outcome = _save(memories, "fact", "在上海工作。", now=3.0)  # the keys are now cached
    assert outcome.kind is SaveKind.DUPLICATE and stored_key.cache_info().currsize > 0
    edited, outcome = _save(again, "fact", "在北京工作", replace_id=again[0].short_id, now=4.0)
    assert outcome.kind is SaveKind.REPLACED
    added, outcome = _save(edited, "fact", "在上海工作", now=5.0)
    assert outcome.kind is SaveKind.ADDED and len(added) == 3
    _, outcome = _save(edited, "fact", "在北京 工作！", now=6.0)
    assert outcome.kind is SaveKind.DUPLICATE and outcome.previous is not None
    assert outcome.previous.id == edited[0].id
    kept, gone = forget(edited, edited[1].id)
    assert gone.deleted[0].content == "喜欢喝咖啡"
    readded, outcome = _save(kept, "fact", "喜欢喝咖啡", now=7.0)
    assert outcome.kind is SaveKind.ADDED and len(readded) == 2
