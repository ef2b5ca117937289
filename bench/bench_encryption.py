"""What sealing member content (`memory/_storage/crypto.py`, `sealed.py`) costs, measured in one run on this machine,
each next to the same JSON work without encryption (the baseline):

1. one owner's list of 20 memories (60 Chinese characters each): dump + seal as one token, and open;
2. a cold load's worth, 1,000 owners x 20 memories: building the file text (every owner sealed, as a migration
   does; a commit seals only the owners it changed: see 1.), and parsing it back into a `GroupDocument`
   (`model_validate_json`, then `open_document` filling the parsed memories in place: the target is < 30%);
3. a batch of 50 change-log entries (old and new values of a memory): encoding the lines, and reading them back;
4. the JSON store itself (`UserMemoryStore` with and without a sealer): the cold load of a 1,000 x 20 group from
   its file (read, parse, open, change log opened) and a commit after one member changed (the serializer seals
   only that member's list; the file write itself is the same in both and left out).

CPU time (`time.process_time`), best of `--repeat` runs: the machine is shared, the best run is the least disturbed.
The store's own paths (serializer caches, the file write, PostgreSQL rows) are measured by their benches.

Run: .venv/bin/python bench/bench_encryption.py [--owners 1000] [--per-owner 20] [--entries 50] [--repeat 15]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from memory._models import GroupDocument, GroupKey, Memory, MemoryType, UserMemories  # noqa: E402
from memory._storage import changelog  # noqa: E402
from memory._storage.crypto import keyring_from, new_key  # noqa: E402
from memory._storage.serialize import DocumentSerializer, Loaded  # noqa: E402
from memory._storage.store import parse_document  # noqa: E402
from memory._storage.sealed import (  # noqa: E402
    GROUP_MEMORIES_SEALED,
    SEALED,
    open_document,
    open_entry,
    open_list,
    seal_entry,
    seal_list,
)

GROUP = GroupKey("lark", "oc_busy_group")
TYPES = list(MemoryType)
# Common characters: contents shaped like real memories (every one distinct, no repeated phrase to compress).
HANZI = (
    "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可也你说年着过下能而方后多自学"
    "周三负责支付服务上线时间回滚预案喜欢爬山不吃香菜生日十月会议纪要项目进度报告简洁直接风格老王小李"
)


def content(rng: random.Random, chars: int = 60) -> str:
    return "".join(rng.choice(HANZI) for _ in range(chars))


def owner_list(rng: random.Random, owner: int, per_owner: int) -> list[Memory]:
    t = 1_700_000_000.0
    return [
        Memory(
            id=f"{owner:08x}-0000-4000-8000-{i:012x}",
            type=TYPES[i % 3],
            content=content(rng),
            created_at=t + i,
            updated_at=t + i,
            importance=0.5 + (i % 5) / 10,
        )
        for i in range(per_owner)
    ]


def compare(
    name: str, plain: Callable[[], Any], sealed: Callable[[], Any], repeat: int, unit: str = "", per: int = 1
) -> None:
    """Print the least CPU time of `repeat` runs of each, run alternately so that both see the same machine."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeat):
        for work, spent in ((plain, times[0]), (sealed, times[1])):
            t = time.process_time()
            work()
            spent.append(time.process_time() - t)
    plain_ms, sealed_ms = min(times[0]) * 1000, min(times[1]) * 1000
    extra = sealed_ms - plain_ms
    each = f"  (+{extra * 1000 / per:.1f} µs per {unit})" if unit else ""
    print(f"  {name:<34} {plain_ms:9.3f} ms {sealed_ms:9.3f} ms  {extra:+9.3f} ms  {extra / plain_ms:+7.0%}{each}")


def header(title: str) -> None:
    print(f"\n{title}\n  {'':<34} {'plain':>12} {'encrypted':>12} {'added':>12} {'':>8}")


# ----------------------------------------------------------------------------------------------- 1. one owner
def bench_one_owner(sealer, per_owner: int, repeat: int) -> None:
    rng = random.Random(1)
    memories = owner_list(rng, 1, per_owner)
    header(f"1. one owner's list of {per_owner} memories (60 Chinese characters each)")

    def plain_dump() -> bytes:
        return json.dumps([m.model_dump(mode="json", exclude_none=True) for m in memories], ensure_ascii=False).encode()

    def sealed_dump() -> bytes:
        readable, token = seal_list(sealer, GROUP, "ou_1", memories)
        return json.dumps({"memories": readable, SEALED: token}, ensure_ascii=False).encode()

    plain, sealed = plain_dump(), sealed_dump()
    compare("dump (+ seal)", plain_dump, sealed_dump, repeat * 20, "owner")

    def plain_load() -> list[Memory]:
        return [Memory.model_validate(d) for d in json.loads(plain)]

    def sealed_load() -> list[Memory]:
        raw = json.loads(sealed)
        return open_list(sealer, GROUP, "ou_1", raw["memories"], raw[SEALED])

    assert sealed_load() == plain_load() == memories
    compare("load (+ open)", plain_load, sealed_load, repeat * 20, "owner")
    print(f"  bytes: {len(plain)} plain, {len(sealed)} sealed")


# ----------------------------------------------------------------------------------------------- 2. cold load
def bench_cold_load(sealer, owners: int, per_owner: int, repeat: int) -> None:
    rng = random.Random(2)
    lists = {f"ou_{u:05d}": owner_list(rng, u, per_owner) for u in range(owners)}
    doc = GroupDocument(
        platform=GROUP.platform, group_id=GROUP.group_id, users={u: UserMemories(memories=m) for u, m in lists.items()}
    )
    header(f"2. a cold load's worth: {owners} owners x {per_owner} memories")

    def plain_text() -> bytes:  # the same Python path as the sealed text, without the tokens
        users = {
            user_id: {"memories": [m.model_dump(mode="json", exclude_none=True) for m in entry.memories]}
            for user_id, entry in doc.users.items()
        }
        head = doc.model_dump(mode="json", exclude={"users"}, exclude_none=True)
        return json.dumps({**head, "users": users}, ensure_ascii=False).encode()

    def sealed_text() -> bytes:
        users = {}
        for user_id, entry in doc.users.items():
            readable, token = seal_list(sealer, GROUP, user_id, entry.memories)
            users[user_id] = {"memories": readable, SEALED: token}
        _, group_token = seal_list(sealer, GROUP, None, doc.group_memories)
        head = doc.model_dump(mode="json", exclude={"users", "group_memories"}, exclude_none=True)
        return json.dumps(
            {**head, GROUP_MEMORIES_SEALED: group_token, "group_memories": [], "users": users}, ensure_ascii=False
        ).encode()

    compare("write the whole file (+ seal all)", plain_text, sealed_text, repeat, "owner", owners)
    plain, sealed = DocumentSerializer().dumps(doc), sealed_text()  # the baseline: the store's file as it is today

    def plain_load() -> GroupDocument:
        return parse_document(plain, GROUP)

    def sealed_load() -> GroupDocument:
        loaded = parse_document(sealed, GROUP)
        open_document(sealer, GROUP, loaded)
        return loaded

    assert sealed_load() == plain_load() == doc
    compare("cold load (+ open all)", plain_load, sealed_load, repeat, "owner", owners)
    print(f"  file: {len(plain) / 1e6:.2f} MB plain, {len(sealed) / 1e6:.2f} MB sealed")


# ----------------------------------------------------------------------------------------------- 3. log batch
def bench_log(sealer, entries: int, repeat: int) -> None:
    rng = random.Random(3)
    batch = []
    for n in range(entries):
        old, new = owner_list(rng, n, 1)[0], owner_list(rng, n, 1)[0]
        batch.append(
            {
                "id": 1000 + n,
                "at": 1.7e9 + n,
                "actor": "extraction",
                "kind": changelog.MEMORY,
                "op": "update",
                "scope": "member",
                "owner": f"ou_{n:05d}",
                "target": old.id,
                "old": old.model_dump(mode="json", exclude_none=True),
                "new": new.model_dump(mode="json", exclude_none=True),
            }
        )
    header(f"3. a batch of {entries} change-log entries (old and new of a memory)")

    def plain_encode() -> bytes:
        return changelog.encode(batch)

    def sealed_encode() -> bytes:
        return changelog.encode([seal_entry(sealer, GROUP, e) for e in batch])

    plain, sealed = plain_encode(), sealed_encode()
    compare("encode the lines (+ seal)", plain_encode, sealed_encode, repeat * 10, "entry", entries)

    def plain_read() -> list[dict[str, Any]]:
        return [json.loads(line) for line in plain.splitlines()]

    def sealed_read() -> list[dict[str, Any]]:
        return [open_entry(sealer, GROUP, json.loads(line)) for line in sealed.splitlines()]

    assert sealed_read() == plain_read() == batch
    compare("read the lines (+ open)", plain_read, sealed_read, repeat * 10, "entry", entries)
    print(f"  bytes: {len(plain)} plain, {len(sealed)} sealed")


# ----------------------------------------------------------------------------------------------- 4. the store
def bench_store(sealer, owners: int, per_owner: int, repeat: int) -> None:
    import asyncio
    import tempfile

    from memory._storage.store import UserMemoryStore

    rng = random.Random(4)
    doc = GroupDocument(
        platform=GROUP.platform,
        group_id=GROUP.group_id,
        users={f"ou_{u:05d}": UserMemories(memories=owner_list(rng, u, per_owner)) for u in range(owners)},
    )
    header(f"4. the JSON store: {owners} owners x {per_owner} memories")
    with tempfile.TemporaryDirectory() as tmp:
        dirs = {"plain": Path(tmp) / "plain", "sealed": Path(tmp) / "sealed"}
        sealers = {"plain": None, "sealed": sealer}
        for name, directory in dirs.items():
            store = UserMemoryStore(directory, durable=False, sealer=sealers[name])
            path = store.path_for(GROUP)
            path.parent.mkdir(parents=True)
            path.write_bytes(DocumentSerializer(GROUP, sealers[name]).dumps(doc))

        async def cold_loads() -> dict[str, list[float]]:
            """CPU time of `document()` on a fresh store, inside one event loop (starting a loop per run costs
            far more than the load and would hide it)."""
            spent: dict[str, list[float]] = {"plain": [], "sealed": []}
            docs = {}
            for _ in range(repeat):
                for name in spent:
                    store = UserMemoryStore(dirs[name], durable=False, sealer=sealers[name])
                    t = time.process_time()
                    docs[name] = await store.document(GROUP)
                    spent[name].append(time.process_time() - t)
            assert docs["plain"] == docs["sealed"] == doc
            return spent

        spent = asyncio.run(cold_loads())
        plain_ms, sealed_ms = min(spent["plain"]) * 1000, min(spent["sealed"]) * 1000
        print(
            f"  {'cold load from the file':<34} {plain_ms:9.3f} ms {sealed_ms:9.3f} ms  {sealed_ms - plain_ms:+9.3f} ms"
            f"  {(sealed_ms - plain_ms) / plain_ms:+7.0%}  (+{(sealed_ms - plain_ms) * 1000 / owners:.1f} µs per owner)"
        )
        size = {
            name: (dirs[name] / GROUP.platform).stat() and sum(p.stat().st_size for p in dirs[name].rglob("*.json"))
            for name in dirs
        }
        print(f"  file: {size['plain'] / 1e6:.2f} MB plain, {size['sealed'] / 1e6:.2f} MB sealed")

    serializers = {"plain": DocumentSerializer(GROUP), "sealed": DocumentSerializer(GROUP, sealer)}
    for serializer in serializers.values():
        serializer.dumps(doc)
    changing = "ou_00007"

    def commit(name: str) -> Callable[[], bytes]:
        def one() -> bytes:  # what a commit does after `_put` replaced one member's list
            memories = doc.users[changing].memories
            doc.users[changing] = UserMemories(memories=[*memories[1:], memories[0]])
            return serializers[name].dumps(doc)

        return one

    compare("commit after one member changed", commit("plain"), commit("sealed"), repeat * 4)

    # The first commit after a cold load: no fragment cached yet; a sealed file's tokens are reused as read.
    files = {name: DocumentSerializer(GROUP, sealers[name]).dumps(doc) for name in sealers}
    times: dict[str, list[float]] = {"plain": [], "sealed": []}
    for _ in range(max(3, repeat // 2)):
        for name in times:
            loaded = Loaded()
            fresh = parse_document(files[name], GROUP, sealers[name], loaded=loaded)
            serializer = DocumentSerializer(GROUP, sealers[name])
            serializer.loaded(fresh, loaded)
            fresh.users[changing] = UserMemories(memories=fresh.users[changing].memories[1:])
            t = time.process_time()
            serializer.dumps(fresh)
            times[name].append(time.process_time() - t)
            del fresh, loaded, serializer
    plain_ms, sealed_ms = min(times["plain"]) * 1000, min(times["sealed"]) * 1000
    print(
        f"  {'first commit after a cold load':<34} {plain_ms:9.3f} ms {sealed_ms:9.3f} ms  {sealed_ms - plain_ms:+9.3f} ms"
        f"  {(sealed_ms - plain_ms) / plain_ms:+7.0%}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--owners", type=int, default=1000)
    parser.add_argument("--per-owner", type=int, default=20)
    parser.add_argument("--entries", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    sealer = keyring_from(new_key(), {}).sealer()
    import cryptography
    from cryptography.hazmat.backends.openssl.backend import backend

    print(
        f"AES-GCM sealing, cryptography {cryptography.__version__} ({backend.openssl_version_text()}), "
        f"CPU time, best of {args.repeat}"
    )
    bench_one_owner(sealer, args.per_owner, args.repeat)
    bench_cold_load(sealer, args.owners, args.per_owner, args.repeat)
    bench_log(sealer, args.entries, args.repeat)
    bench_store(sealer, args.owners, args.per_owner, args.repeat)


if __name__ == "__main__":
    main()
