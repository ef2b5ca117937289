"""What an import may take, whatever the file (issue 32 items 3 and 9): a LivingMemory database gives one record a
memory and no more text than the file holds, however its tables were crafted; a large import of this plugin's own
format is held about once while it is read, not once per step (text, bytes, parsed JSON, models).

The databases are LivingMemory's as `livingmemory_files` writes them, then altered the way a hostile file would be.
Reading a file happens before any store is touched: it is the same for the JSON store and PostgreSQL.
"""

from __future__ import annotations

import gc
import io
import random
import sqlite3
import tracemalloc
from zoneinfo import ZoneInfo

import pytest
from livingmemory_files import LivingMemory
from PIL import Image
from service_kit import speaker

from memory import GroupKey, IncomingAttachment, MemoryService
from memory._manage import transfer
from memory._manage.transfer import lm_files, reading
from memory._settings import DSN_ENV

T0 = 1_780_000_000.0
QQ = "aiocqhttp:GroupMessage:123456"
G = GroupKey("lark", "oc_pics")


def crafted(tmp_path, text: str, source_rows: int) -> bytes:
    """LivingMemory's database with one memory whose `memory_sources` row is repeated `source_rows` times (the table
    rebuilt without its key, as no LivingMemory writes it)."""
    lm_store = LivingMemory()
    lm_store.add(text, QQ, T0)
    path = tmp_path / "crafted.db"
    lm_store.database(path)
    db = sqlite3.connect(path)
    db.execute("DROP TABLE memory_sources")
    db.execute("CREATE TABLE memory_sources (memory_id INTEGER, source_json TEXT, created_at REAL, updated_at REAL)")
    db.executemany("INSERT INTO memory_sources VALUES (1, '[]', 1.0, 1.0)", [()] * source_rows)
    db.commit()
    db.execute("VACUUM")
    db.close()
    return path.read_bytes()


def test_duplicate_source_rows_give_one_record_past_the_item_cap(tmp_path):
    raw = crafted(tmp_path, "大家约好周六下午去爬山", transfer.format.MAX_IMPORT_ITEMS + 1)
    records = lm_files.from_database(raw)
    assert [r.content for r in records] == ["大家约好周六下午去爬山"]


def test_one_long_text_repeated_by_source_rows_is_held_once(tmp_path):
    """The review's 4.2 MB file (one 4 MB text, 3,000 duplicate source rows) took 3 GB; at a tenth of its size the
    reading holds the text a few times, not once per row."""
    raw = crafted(tmp_path, "长" * 400_000, 300)
    tracemalloc.start()
    try:
        records = lm_files.from_database(raw)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(records) == 1
    assert peak < 4 * len(raw), f"reading a {len(raw)}-byte file held {peak} bytes"


def test_a_database_that_yields_more_text_than_it_holds_is_refused(tmp_path):
    """A crafted `memory_sources` table whose messages are a generated column makes a megabyte a row out of a few
    kilobytes: refused with the reason once what was read passes the file's size, before the rest is read."""
    lm_store = LivingMemory()
    for n in range(200):
        lm_store.add(f"第{n}条记忆", QQ, T0 + n)
    path = tmp_path / "generated.db"
    lm_store.database(path)
    db = sqlite3.connect(path)
    db.execute("DROP TABLE memory_sources")
    db.execute(
        "CREATE TABLE memory_sources (memory_id INTEGER PRIMARY KEY,"
        " source_json TEXT GENERATED ALWAYS AS (hex(zeroblob(500000))) VIRTUAL)"
    )
    db.executemany("INSERT INTO memory_sources (memory_id) VALUES (?)", [(n,) for n in range(1, 201)])
    db.commit()
    db.close()
    raw = path.read_bytes()
    assert len(raw) < 200_000
    tracemalloc.start()
    try:
        with pytest.raises(transfer.ImportRefused, match="超过了文件本身的大小"):
            transfer.read_upload(raw, platforms={}, zone=ZoneInfo("Asia/Shanghai"), now=T0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * 1_000_000, f"refusing it held {peak} bytes (200 rows of 1 MB were there to read)"


def test_a_text_upload_is_read_as_it_came_measured_in_utf8_bytes():
    """The page's text is no longer copied to bytes: its size is still its UTF-8 size, and a character UTF-8 cannot
    hold (a lone surrogate, which the request's JSON can carry) still refuses the file."""
    with pytest.raises(transfer.ImportRefused, match="1200 字节"):
        reading.check_size("中" * 400, 1000)
    with pytest.raises(transfer.ImportRefused, match="无法编码"):
        transfer.read_import('{"format": "astrbot_plugin_user_memory.export", "note": "\ud83d"}')
    lm_store = LivingMemory()
    lm_store.add("小王周五值班", QQ, T0)
    as_text = transfer.read_upload(lm_store.export_csv(), platforms={}, zone=ZoneInfo("Asia/Shanghai"), now=T0)
    as_bytes = transfer.read_upload(
        lm_store.export_csv().encode(), platforms={}, zone=ZoneInfo("Asia/Shanghai"), now=T0
    )
    assert [m.content for g in as_text.groups for ms in g.memories.values() for m in ms] == ["小王周五值班"]
    assert as_text.groups[0].memories == as_bytes.groups[0].memories


# -- item 9: a large import of this plugin's own format -----------------------------------------------------------
def noise(n: int) -> bytes:
    """A picture that does not compress (about 200 KB): what makes an export with pictures large."""
    out = io.BytesIO()
    Image.frombytes("RGB", (256, 256), random.Random(n).randbytes(256 * 256 * 3)).save(out, format="PNG")
    return out.getvalue()


async def large_export(service: MemoryService, pictures: int) -> str:
    """The page's export of a group whose members saved `pictures` pictures, as the page uploads it (its text)."""
    for n in range(pictures):
        who = speaker(f"ou_{n // 10}", G.group_id)
        answer = await service.tools.save_memory(
            who,
            memory_type="fact",
            content=f"第{n}张：部署架构图",
            attachments=[IncomingAttachment(noise(n), "图.png")],
        )
        assert "已保存" in answer, answer
    await service.group_index.flush()
    download = await service.manager.export("lark", G.group_id, "", decrypted=True)
    return b"".join([chunk async for chunk in download.chunks]).decode()


@pytest.fixture(params=["json", "postgres"])
async def target(request, make_service, tmp_path, monkeypatch):
    """An empty store of each kind to import into."""
    if request.param == "json":
        service = make_service(data_dir=tmp_path / "target")
    else:
        monkeypatch.delenv(DSN_ENV, raising=False)
        dsn = request.getfixturevalue("postgres_dsn")
        service = make_service(data_dir=tmp_path / "target", storage_backend="postgres", postgres_dsn=dsn)
    await service.start()
    yield service
    await service.stop()


async def test_previewing_a_large_import_holds_it_about_once(make_service, target, tmp_path):
    """Previewing held the page's text again as bytes, json.loads decoded those back into text, the parsed file
    kept every picture's base64 beside its bytes: over three times the file. Now the text is parsed as it came and
    each picture's base64 is let go once decoded; the preview and the import still take every picture."""
    content = await large_export(make_service(data_dir=tmp_path / "source"), 40)
    size = len(content.encode())
    assert size > 10_000_000
    gc.collect()
    tracemalloc.start()
    try:
        preview = await target.manager.preview_import(content)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    [group] = preview["groups"]
    assert group["counts"]["new"] == 40 and group["files"] == 40 and group["refused"] is None
    assert peak < 1.6 * size, f"previewing a {size}-byte import held {peak} bytes at its peak"
    [result] = (await target.manager.apply_import(content, user="admin"))["groups"]
    assert result["refused"] is None and result["added"] == 40
    mine = await target.store.memories(G, "ou_0")
    assert await target.pictures.blobs.read(G, mine[0].attachment.sha256) == noise(0)
