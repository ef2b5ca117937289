"""Child process for tests/test_crash_windows.py: runs one scenario against a JSON store in DIRECTORY and dies with
`os._exit` at one exact point of a commit (no signal, no timing), as a crash there would leave the files.

    python crash_window_process.py SCENARIO DIRECTORY

- `hook`: member u1 saves "first"; while that commit awaits its commit hook (the todo due index writes there), u2's
  save "second" is applied in memory; the process dies when the next commit reaches its hook, so only the first
  commit got to disk.
- `erase-before-document`: u1 saves two memories, then forgets all; the process dies at the erasure's document write.
- `erase-after-document`: the same, dying at the first log rewrite after the erasure's document write began (the
  purge of the earlier entries).

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


async def main(scenario: str, directory: str) -> None:
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
