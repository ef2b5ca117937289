"""Child process for tests/test_crash_windows.py: runs one scenario against a JSON store in DIRECTORY and dies with
`os._exit` at one exact point of a commit (no signal, no timing), as a crash there would leave the files.

    python crash_window_process.py SCENARIO DIRECTORY

- `hook`: member u1 saves "first"; while that commit awaits its commit hook (the todo due index writes there), u2's
  save "second" is applied in memory; the process dies when the next commit reaches its hook, so only the first
  commit got to disk.
- `erase-before-document`: u1 saves two memories, then forgets all; the process dies at the erasure's document write.
- `erase-after-document`: the same, dying at the first log rewrite after the erasure's document write began (the
  purge of the earlier entries).

- `fast-<window>` (issue 37 item 3): the windows of a fast commit (acknowledged once its log append is durable,
  the document written behind), one exact point each: `append-torn`, `appended-unacked`, `acked-writer-idle`,
  `writer-temp`, `writer-renamed`, `writer-during-appends`, `sync-before-document`, `erase-after-document`,
  `rewrite-before`, `rewrite-after`, `writer-enospc`; `reopen-dies-in-replay` opens the group and dies in its replay.
  Prints `ACK <text>` for each save acknowledged (the parent checks a fresh store holds each). Encryption at rest
  when the environment holds a key (as the plugin gets it).

Prints `DIED-AT <point>` just before dying, so the parent knows the window was reached."""

import asyncio
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory import GroupKey  # noqa: E402
from memory._storage import UserMemoryStore  # noqa: E402
from memory._rules.operations import forget, save  # noqa: E402
from memory._storage import ERASE, changelog  # noqa: E402
from memory._storage import store as store_module  # noqa: E402

GROUP = GroupKey("lark", "oc_window")


def die(point: str) -> None:
    sys.stdout.write(f"DIED-AT {point}\n")
    sys.stdout.flush()
    os._exit(0)


def add(text: str):
    return lambda memories: save(memories, memory_type="fact", content=text, now=1.0, max_count=100, max_length=200)


async def hook_window(store: UserMemoryStore) -> None:
    applied = asyncio.Event()
    calls = 0
    second: asyncio.Task | None = None

    async def hook() -> None:
        nonlocal calls, second
        calls += 1
        if calls == 1:  # the first commit waits here while the second change is applied in memory
            second = asyncio.create_task(store.change(GROUP, "u2", add("second"), actor="u2"))
            await applied.wait()
        else:
            die("second-commit-hook")

    store.add_listener(lambda key, doc: applied.set() if "u2" in doc.users else None)
    store.add_commit_hook(hook)
    await store.change(GROUP, "u1", add("first"), actor="u1")
    assert second is not None
    await second  # never returns: the second commit dies in its hook


async def erase_window(store: UserMemoryStore, point: str) -> None:
    await store.change(GROUP, "u1", add("住在杭州"), actor="u1")
    await store.change(GROUP, "u1", add("喜欢爬山"), actor="u1")
    document = store.path_for(GROUP)
    armed = False
    real_write, real_rewrite = store_module.write_atomic, changelog.rewrite

    async def write_atomic(path, data, **kwargs):
        if armed and point == "document" and Path(path) == document:
            die("erasure-document-write")
        return await real_write(path, data, **kwargs)

    def rewrite(*args, **kwargs):
        # only once the erasure's document is on disk (the memories are gone from it)
        if armed and point == "purge" and "住在杭州" not in document.read_text(encoding="utf-8"):
            die("purge-after-document")
        return real_rewrite(*args, **kwargs)

    store_module.write_atomic = write_atomic
    changelog.rewrite = rewrite
    armed = True
    await store.change(GROUP, "u1", lambda memories: forget(memories, "all"), actor="u1", label=ERASE)
    die("never")  # the erasure finished without passing the window: the parent fails on this


async def fast_window(directory: Path, window: str) -> None:
    """One window of the fast commit path (see the module's docstring)."""
    from memory._storage import files, replay, writer
    from memory._storage.crypto import keyring_from

    sealer = keyring_from("", os.environ).sealer()
    small = window.startswith("rewrite")
    writer.WRITE_BEHIND_SECONDS = 3600.0 if window in ("acked-writer-idle", "sync-before-document") else 0.01
    writer.RETRY_FIRST = 0.01
    store = UserMemoryStore(
        directory, sealer=sealer, log_max_bytes=6_000 if small else changelog.MAX_BYTES, write_behind=True
    )
    await store.start()
    if window == "reopen-dies-in-replay":
        real_replay = replay.replay

        def dying(doc, entries):
            real_replay(doc, entries)
            die("in-replay")

        replay.replay = dying
        await store.memories(GROUP, "u1")
        die("never")
    document = store.path_for(GROUP)

    async def saved(user: str, text: str) -> None:
        await store.change(GROUP, user, add(text), actor=user)
        sys.stdout.write(f"ACK {text}\n")
        sys.stdout.flush()

    await saved("u1", "seed")  # the first commit writes the document (no document on disk yet)
    await saved("u9", "秘密")
    await store.close()
    armed = False
    real_append, real_write, real_rewrite = changelog.append, store_module.write_atomic, changelog.rewrite

    def append(path, end, data, *, durable):
        if armed and window == "append-torn":
            with open(path, "r+b") as f:
                f.seek(end)
                f.write(data[: len(data) // 2])
            die("append-torn")
        result = real_append(path, end, data, durable=durable)
        if armed and window == "appended-unacked":
            die("appended-unacked")
        return result

    async def write_atomic(path, data, **kwargs):
        if not armed or Path(path) != document:
            return await real_write(path, data, **kwargs)
        if window == "writer-temp":
            files._temp_path(document).write_bytes(data[: len(data) // 2])
            die("writer-temp")
        if window == "writer-renamed":
            tmp = files._temp_path(document)
            tmp.write_bytes(data)
            os.replace(tmp, document)
            die("writer-renamed")
        if window == "writer-during-appends":
            await asyncio.gather(*(saved(f"u{i}", f"写入中{i}") for i in range(3)))
            await real_write(path, data, **kwargs)
            die("writer-during-appends")
        if window == "sync-before-document":
            die("sync-before-document")
        if window == "writer-enospc":
            raise OSError(28, "No space left on device")
        return await real_write(path, data, **kwargs)

    def rewrite(*args, **kwargs):
        if armed and window in ("rewrite-before", "erase-after-document"):  # the erasure's purge, after its document
            die(window)
        result = real_rewrite(*args, **kwargs)
        if armed and window == "rewrite-after":
            die(window)
        return result

    changelog.append, store_module.write_atomic, changelog.rewrite = append, write_atomic, rewrite
    armed = True
    for n in range(40 if small else 3):
        await saved(f"u{n % 4}", f"快{n}")
        if window == "writer-enospc":
            await asyncio.sleep(0.05)  # the writer fails and retries meanwhile
    if window in ("acked-writer-idle", "writer-enospc"):
        die(window)
    if window == "sync-before-document":
        await store.set_opted_out(GROUP, "u2", True, actor="u2")
    if window == "erase-after-document":
        await store.change(GROUP, "u9", lambda memories: forget(memories, "all"), actor="u9", label=ERASE)
    await asyncio.sleep(0.5)  # the writer's turn
    die("never")


async def main(scenario: str, directory: str) -> None:
    if scenario.startswith("fast-"):
        return await fast_window(Path(directory), scenario.removeprefix("fast-"))
    store = UserMemoryStore(Path(directory))
    await store.start()
    if scenario == "hook":
        await hook_window(store)
    elif scenario == "erase-before-document":
        await erase_window(store, "document")
    elif scenario == "erase-after-document":
        await erase_window(store, "purge")
    else:
        sys.exit(f"unknown scenario {scenario}")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
