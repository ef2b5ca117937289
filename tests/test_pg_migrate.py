"""Moving a plugin data dir between the JSON and PostgreSQL stores (scripts/migrate_store.py), on a real
PostgreSQL: JSON → PostgreSQL → JSON gives the same JSON — documents with fields this version does not know,
archive, todos with delivery records, episodes, the change log entry for entry with its ids (erasures still erased,
trimmed entries still gone), carried call totals, vectors — and the plugin works on the moved data."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO, make_event
from memory import GroupKey
from memory._models import Memory
from memory._storage import UserMemoryStore
from memory._models import ArchivedMemory, Delivery, DeliveryState, Episode, Todo
from memory._recall.semantic import VectorStore
from memory._rules.operations import save
from memory._settings import DSN_ENV
from memory._storage import GROUP_OWNER, changelog
from memory._storage.files import episode_file_path
from memory._storage.vectors import vectors_path
from memory._todos.scheduler import INDEX_FILE as DUE_INDEX_FILE

sys.path.insert(0, str(REPO / "scripts"))
import migrate_store  # noqa: E402

TEAM = GroupKey("lark", "oc_team")
QQ = GroupKey("aiocqhttp", "123456789")
ODD = GroupKey("lark", "oc/../群 名")  # an id that cannot be a file name: the safe-name mapping must round-trip
GLOBAL = GroupKey.global_for("lark")
T0 = 1_763_700_000.0
EMBEDDING_MODEL = "embedder/hash-8"


def add(content, memory_type="fact", **kw):
    return lambda memories: save(
        memories, memory_type=memory_type, content=content, now=T0, max_count=500, max_length=200, **kw
    )


def memory(mid, content, **extra):
    return Memory(id=mid, type="fact", content=content, created_at=T0, updated_at=T0 + 1, **extra)


async def build_data_dir(data_dir: Path) -> None:
    """A plugin data dir holding everything a group can hold, written through the real JSON store (a small log cap,
    so the log has been trimmed and carries call totals), then given fields this version does not know."""
    groups = data_dir / "groups"
    store = UserMemoryStore(groups, durable=False, log_max_bytes=12_000)
    await store.change(TEAM, "ou_a", add("最早的一条，会被裁剪出变更记录"), actor="ou_a")
    for i in range(60):  # enough to trim the log: the oldest calls leave, their totals are carried
        await store.record(
            TEAM,
            {
                "kind": "call",
                "messages": 10,
                "input_tokens": 100 + i,
                "output_tokens": 7,
                "applied": 1,
                "rejected": 0,
                "parse_error": None,
            },
            actor="extraction",
        )
        if i % 10 == 0:
            await store.record(
                TEAM, {"kind": "call", "input_tokens": 50, "output_tokens": 5, "decision": "keep"}, actor="review"
            )
    await store.change(TEAM, "ou_a", add("住在上海"), actor="ou_a")
    await store.change(
        TEAM,
        "ou_a",
        lambda m: ([*m, memory("future-1", "喜欢猫", mood={"from": "v9", "n": [1, "二"]})], None),
        actor="ou_a",
    )
    await store.change(TEAM, GROUP_OWNER, add("群规：周五发周报", added_by="ou_a"), actor="ou_a")
    await store.change(TEAM, "ou_b", add("负责支付服务"), actor="ou_b")
    await store.change(TEAM, "ou_b", add("老家在成都"), actor="ou_b")
    # several owners in one commit: one transaction in the log
    await store.change_many(
        TEAM,
        ["ou_a", "ou_b"],
        lambda lists: (
            {
                "ou_a": [*lists["ou_a"], memory("m-a2", "喜欢喝美式")],
                "ou_b": [*lists["ou_b"], memory("m-b3", "不吃辣")],
            },
            None,
        ),
        actor="consolidation",
        label="merge",
    )

    def archive_first(lists, archived):
        first, *rest = lists["ou_b"]
        return (
            {"ou_b": rest},
            [
                *archived,
                ArchivedMemory(memory=first, archived_at=T0 + 5, reason="decay", actor="maintenance", owner="ou_b"),
            ],
            None,
        )

    await store.change_archive(TEAM, ["ou_b"], archive_first, actor="maintenance")
    delivered = Todo(
        id="todo-1",
        content="交周报",
        creator="ou_a",
        assignee="ou_a",
        created_at=T0,
        updated_at=T0,
        remind_at=T0 + 3600,
        platform_id="lark_main",
        origin="lark_main:GroupMessage:oc_team",
        delivery=Delivery(
            occurrence=T0 + 60,
            state=DeliveryState.SENT,
            attempts=2,
            sent_at=T0 + 61,
            last_error="timeout",
            channel="webhook",
        ),
    )
    group_todo = Todo(
        id="todo-2",
        content="周五团建",
        creator="ou_b",
        created_at=T0,
        updated_at=T0,
        recurrence="weekly:fri",
        remind_at=T0 + 86400,
        platform_id="lark_main",
        origin="lark_main:GroupMessage:oc_team",
        source="extraction",
        confirmed=False,
    )
    await store.change_todos(TEAM, lambda todos: ([*todos, delivered, group_todo], None), actor="ou_a")
    episode = Episode(
        id="ep-1",
        start=T0,
        end=T0 + 600,
        participants=["ou_a", "ou_b"],
        participant_names=["老王", "小李"],
        summary="老王和小李讨论了上线时间，定在周三",
        created_at=T0 + 700,
        messages=12,
        topic_tags=["上线"],
    )
    await store.change_episodes(TEAM, lambda eps: ([*eps, episode], None), actor="extraction")
    # a member who wiped their memories: their entries stay, without content, and cannot be reverted
    await store.change(TEAM, "ou_c", add("手机号 138xxxx"), actor="ou_c")
    await store.change(TEAM, "ou_c", add("住在杭州"), actor="ou_c")
    await store.change_many(TEAM, ["ou_c"], lambda lists: ({"ou_c": []}, None), actor="ou_c", label="erase")

    await store.change(QQ, "10001", add("QQ 群里的成员记忆"), actor="10001")
    await store.change(ODD, "ou_z", add("群号里有斜杠和中文"), actor="ou_z")
    await store.change(GLOBAL, "ou_a", add("全局：名字叫王强"), actor="ou_a")
    # Semantic recall's vectors of the group's memories (members' and the group's)
    vectors = VectorStore(groups, HashEmbeddings(), EMBEDDING_MODEL, durable=False)
    await vectors.sync(TEAM, (await store.document(TEAM)).all_memories())
    await vectors.sync(GLOBAL, (await store.document(GLOBAL)).all_memories())
    await vectors.close()
    await store.close()

    # Fields of a newer version: at the top of the document, on a member's entry (a future opt-out flag), and beside
    # the episodes (inside an episode: `topic_tags` above).
    path = store.path_for(TEAM)
    doc = json.loads(path.read_text("utf-8"))
    doc["future_settings"] = {"retention_days": 30, "标签": ["甲", "乙"]}
    doc["users"]["ou_a"]["extraction_opt_out"] = True
    path.write_text(json.dumps(doc, ensure_ascii=False, indent=1), "utf-8")


class HashEmbeddings:
    """A deterministic embedding provider: 8 numbers from the text's hash."""

    async def get_embeddings(self, texts):
        return [[b / 255 - 0.5 for b in hashlib.sha256(t.encode()).digest()[:8]] for t in texts]


def group_files(groups_dir: Path, key: GroupKey) -> dict[str, object]:
    """What the JSON files of a group say, parsed: the document, the episodes, the change log's lines (without the
    lines that end fast commits: framing of how the entries were appended, not data a move carries)."""
    path = UserMemoryStore(groups_dir).path_for(key)
    episodes = episode_file_path(path)
    log = changelog.log_path(path)
    vectors = vectors_path(groups_dir, key)
    return {
        "vectors": json.loads(vectors.read_text("utf-8")) if vectors.exists() else None,
        "document": json.loads(path.read_text("utf-8")),
        "episodes": json.loads(episodes.read_text("utf-8")) if episodes.exists() else None,
        "log": [
            entry
            for line in log.read_text("utf-8").splitlines()
            if line.strip() and (entry := json.loads(line))["kind"] != changelog.COMMIT
        ]
        if log.exists()
        else [],
    }


async def run_script(*args: str) -> tuple[int, str]:
    lines: list[str] = []
    code = await migrate_store.run(list(args), out=lines.append)
    return code, "\n".join(lines)


async def test_json_to_postgres_and_back_gives_the_same_json(tmp_path, postgres_server, postgres_dsn):
    source, back = tmp_path / "source", tmp_path / "back"
    await build_data_dir(source)
    src_store = UserMemoryStore(source / "groups")
    keys = set(await src_store.stored_groups())
    assert keys == {TEAM, QQ, ODD, GLOBAL}
    src_log = [
        entry
        for line in changelog.log_path(src_store.path_for(TEAM)).read_text("utf-8").splitlines()
        if (entry := json.loads(line))["kind"] != changelog.COMMIT  # a fast commit's end: no entry of its own
    ]
    carried = [e for e in src_log if e["kind"] == changelog.CARRIED]
    assert {e["actor"] for e in carried} == {"extraction", "review"} and src_log[len(carried)]["id"] > 1, (
        "the data must include a trimmed log"
    )
    assert any(e.get("erased") for e in src_log) and any("txn" in e for e in src_log)
    assert "手机号 138xxxx" not in changelog.log_path(src_store.path_for(TEAM)).read_text("utf-8")
    assert len(group_files(source / "groups", TEAM)["vectors"]["vectors"]) == 7

    code, output = await run_script("--from", f"json:{source}", "--to", f"postgres:{postgres_dsn}")
    assert code == 0, output
    assert "moved 4 group(s): 10 memories, 1 archived, 2 todos, 1 episodes" in output and "8 vectors" in output
    assert "FAILED" not in output
    database = postgres_dsn.rsplit("/", 1)[1]
    in_tables = postgres_server.psql(
        "SELECT (SELECT count(*) FROM um_groups), (SELECT count(*) FROM um_vectors),"
        " (SELECT count(*) FROM um_vectors WHERE array_length(vec, 1) = 8)",
        database,
    )
    assert in_tables.strip() == "4|8|8"  # real rows: every group, every vector as float4[]

    # Back out, as a user runs it: AstrBot's Python, the script's own process, the DSN from the environment; into
    # a data dir whose due index (of earlier groups) would hide the moved todos from the reminder scheduler.
    back.mkdir()
    stale_index = back / DUE_INDEX_FILE
    stale_index.write_text('{"version": 1, "groups": []}', "utf-8")
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "migrate_store.py"), "--from", "postgres:", "--to", f"json:{back}"],
        env={**os.environ, DSN_ENV: postgres_dsn},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "moved 4 group(s)" in result.stdout
    assert not stale_index.exists()  # the plugin rebuilds it from the group files

    back_store = UserMemoryStore(back / "groups")
    assert set(await back_store.stored_groups()) == keys
    for key in keys:
        assert group_files(back / "groups", key) == group_files(source / "groups", key), key
        assert migrate_store.canonical(await back_store.export_group(key)) == migrate_store.canonical(
            await src_store.export_group(key)
        ), key

    # What the comparison covered, said plainly
    doc = await back_store.document(TEAM)
    assert doc.model_extra["future_settings"] == {"retention_days": 30, "标签": ["甲", "乙"]}
    assert doc.users["ou_a"].model_extra == {"extraction_opt_out": True}
    assert next(m for m in doc.users["ou_a"].memories if m.id == "future-1").model_extra["mood"]["n"] == [1, "二"]
    assert [a.memory.content for a in doc.archive] == ["负责支付服务"]
    todo = next(t for t in doc.todos if t.id == "todo-1")
    assert todo.delivery.attempts == 2 and todo.delivery.model_extra == {"channel": "webhook"}
    assert (await back_store.episodes(TEAM))[0].model_extra == {"topic_tags": ["上线"]}
    src_totals, back_totals = await src_store.call_totals(TEAM), await back_store.call_totals(TEAM)
    assert back_totals == src_totals and back_totals.calls == 66 and back_totals.by_actor["review"].calls == 6
    ids = [e.get("id") for e in await src_store.log_entries(TEAM)]
    assert [e.get("id") for e in await back_store.log_entries(TEAM)] == ids
    assert "手机号 138xxxx" not in changelog.log_path(back_store.path_for(TEAM)).read_text(
        "utf-8"
    )  # erased stays erased
    # The log goes on from where it was, in the moved-back store as in the source
    await back_store.change(TEAM, "ou_b", add("回到 JSON 之后的新记忆"), actor="ou_b")
    await src_store.change(TEAM, "ou_b", add("回到 JSON 之后的新记忆"), actor="ou_b")
    assert (await back_store.log_entries(TEAM))[-1]["id"] == (await src_store.log_entries(TEAM))[-1]["id"]
    for store in (src_store, back_store):
        await store.close()


async def test_a_second_run_skips_what_the_target_holds_and_moves_the_rest(tmp_path, postgres_dsn):
    source = tmp_path / "source"
    await build_data_dir(source)
    code, output = await run_script(
        "--from", f"json:{source}", "--to", f"postgres:{postgres_dsn}", "--group", "lark:oc_team"
    )
    assert code == 0 and "moved 1 group(s)" in output, output
    # The bot ran on PostgreSQL meanwhile: its newer data there must never be overwritten by the old files.
    from memory._storage import PostgresMemoryStore

    live = PostgresMemoryStore(postgres_dsn, instance="bot")
    await live.start()
    await live.change(TEAM, "ou_a", add("切换之后才说的"), actor="ou_a")
    before = migrate_store.canonical(await live.export_group(TEAM))

    code, output = await run_script("--from", f"json:{source}", "--to", f"postgres:{postgres_dsn}")
    assert code == 0, output
    assert "moved 3 group(s)" in output
    assert "skipped 1 group(s) the target already holds" in output and str(TEAM) in output
    reader = PostgresMemoryStore(postgres_dsn, instance="reader")
    await reader.start()
    assert migrate_store.canonical(await reader.export_group(TEAM)) == before
    assert set(await reader.stored_groups()) == {TEAM, QQ, ODD, GLOBAL}

    code, output = await run_script("--from", f"json:{source}", "--to", f"postgres:{postgres_dsn}", "--dry-run")
    assert code == 0 and "would move 0 group(s)" in output and "skipped 4 group(s)" in output, output
    for store in (live, reader):
        await store.close()


async def test_the_plugin_works_on_moved_data(tmp_path, postgres_dsn, make_plugin):
    from test_plugin import call_tool

    source = tmp_path / "source"
    await build_data_dir(source)
    code, output = await run_script("--from", f"json:{source}", "--to", f"postgres:{postgres_dsn}")
    assert code == 0, output

    plugin = make_plugin(storage_backend="postgres", postgres_dsn=postgres_dsn)
    await plugin.initialize()
    try:
        me = make_event("", group=TEAM.group_id, user="ou_a")
        listed = await call_tool(plugin, "lark_list_memory", me)
        assert "住在上海" in listed and "喜欢猫" in listed and "群规：周五发周报" in listed
        saved = await call_tool(plugin, "lark_save_memory", me, memory_type="fact", content="迁移之后新记的一条")
        assert saved.startswith("已保存"), saved
        assert "迁移之后新记的一条" in await call_tool(plugin, "lark_list_memory", me)
        prompt = make_event("我住在哪里？", group=TEAM.group_id, user="ou_a")
        from test_plugin import system_prompt_for

        assert "住在上海" in await system_prompt_for(plugin, prompt)
    finally:
        await plugin.terminate()


async def test_a_store_that_cannot_be_reached_stops_before_anything_moves(tmp_path, postgres_server):
    source = tmp_path / "source"
    await build_data_dir(source)
    wrong = f"postgresql://postgres:s3cret@127.0.0.1:{postgres_server.port}/no_such_database"
    code, output = await run_script("--from", f"json:{source}", "--to", f"postgres:{wrong}")
    assert code == 2 and "unavailable" in output and "s3cret" not in output, output
    code, output = await run_script("--from", f"json:{tmp_path / 'nothing'}", "--to", f"json:{tmp_path / 'x'}")
    assert code == 2 and "does not exist" in output, output
    assert not (tmp_path / "x").exists()


async def test_a_file_that_names_no_group_is_reported_not_left_behind_silently(tmp_path, postgres_dsn):
    source = tmp_path / "source"
    await build_data_dir(source)
    broken = source / "groups" / "lark" / "oc_broken.json"
    broken.write_text('{"platform": "lark", "users": {', "utf-8")  # torn: no group id can be read
    code, output = await run_script("--from", f"json:{source}", "--to", postgres_dsn)  # a bare DSN URL works too
    assert code == 1, output
    assert "moved 4 group(s)" in output and "NOT MOVED 1 file(s)" in output and str(broken) in output
