"""Vectors in PostgreSQL (`um_vectors`): they persist and reload, another instance takes them instead of embedding
them again, and a group's vectors move between the files and the database bit for bit."""

from memory import GroupKey
from memory._models import Memory, MemoryType
from memory._recall import semantic as sem
from memory._storage.vectors import VectorFiles
from memory._storage._postgres.vectors import PostgresVectors

from test_semantic import FakeProvider

G = GroupKey("lark", "oc_vectors")


def memories(*texts: str) -> list[Memory]:
    return [
        Memory(id=f"m{i}", type=MemoryType.FACT, content=t, created_at=1.0, updated_at=1.0) for i, t in enumerate(texts)
    ]


def put(*items):
    return lambda current: ([*current, *items], None)


async def test_vectors_persist_reload_and_are_shared_between_instances(pair):
    a, b = pair
    items = memories("喜欢乌龙茶", "负责支付服务", "周五做技术分享")
    await a.change(G, "u1", put(*items), actor="test")
    provider_a = FakeProvider()
    va = sem.VectorStore(PostgresVectors(a), provider_a, "fake/1")
    await va.sync(G, items)
    assert sum(len(c) for c in provider_a.calls) == 3
    [stored] = await PostgresVectors(b).read_group(G)
    assert stored.model == "fake/1" and set(stored.entries) == {"m0", "m1", "m2"}

    provider_b = FakeProvider()  # another instance: reloads them, embeds only the query
    vb = sem.VectorStore(PostgresVectors(b), provider_b, "fake/1")
    scores = await vb.similarities(G, "乌龙茶", ["m0", "m1", "m2"])
    assert scores is not None and max(scores, key=scores.get) == "m0"
    assert provider_b.calls == [["乌龙茶"]]

    more = memories("喜欢乌龙茶", "负责支付服务", "周五做技术分享", "养了一只猫")
    await va.sync(G, more)  # a embeds the new memory and deletes nothing
    await vb.sync(G, more[1:])  # b takes m3 from the table (no embedding) and drops m0
    assert provider_b.calls == [["乌龙茶"]]
    [stored] = await PostgresVectors(a).read_group(G)
    assert set(stored.entries) == {"m1", "m2", "m3"}


async def test_a_groups_vectors_move_between_files_and_postgres_bit_for_bit(pair, tmp_path):
    a, _ = pair
    items = memories("喜欢乌龙茶", "负责支付服务")
    await a.change(G, "u1", put(*items), actor="test")
    files = sem.VectorStore(tmp_path, FakeProvider(), "fake/1", durable=False)
    await files.sync(G, items)
    [from_file] = await files.persistence.read_group(G)

    await PostgresVectors(a).write_group(G, [from_file])
    [from_db] = await PostgresVectors(a).read_group(G)
    assert from_db.same_as(from_file)

    back = VectorFiles(tmp_path / "back", durable=False)
    await back.write_group(G, [from_db])
    [again] = await back.read_group(G)
    assert again.same_as(from_file)
    assert back.path_for(G).read_bytes() == files.path_for(G).read_bytes()
