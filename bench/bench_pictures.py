"""What a picture costs (issue 24), measured in one run on this machine:

1. The reply path: `on_llm_request` through the real plugin adapter (a real AstrBot event and ProviderRequest), for a
   member of a warm group of 1,000 members x 20 memories, with and without a picture in the message (a photo-like
   JPEG of 200-500 KB in a local file, where AstrBot's preprocessing leaves it), against main (the baseline commit,
   imported beside this checkout as bench_core does it) for the same messages. Rows:
   - no picture: the text message alone, from a member keeping a memory with a picture (one of whose words the
     message shares, so relevance chooses), and from a member keeping none (main and current);
   - picture, main: the same message with an `Image` component (main never looks at it);
   - picture, a member keeping none: current; their memories are known to keep no picture: nothing is read;
   - picture, its memory found: current; the member keeps a memory with this very picture: the file is read and
     hashed (sha256) in one worker thread, and the memory pinned first;
   - another picture + AstrBot's caption: a different JPEG (of another size: only looked at, neither read nor
     hashed) and AstrBot's `<image_caption>` text part joining the relevance query.
   Wall time (perf_counter) and CPU time: of the event loop's thread (thread_time, what the plugin holds the loop
   for) and of the process (process_time: the worker threads' read and hash included); p50 / p99 / mean, in us.
2. The disk cost per picture: the kept file and its thumbnail (`AttachmentStore.put`, durable), plaintext and
   sealed with an encryption key, and the time one put takes (check with Pillow, thumbnail, write, fsync); plus the
   memory's description (`Attachment`) in the group's file.

Run: .venv/bin/python bench/bench_pictures.py [--iterations 2000] [--baseline main]

Measured 2026-11-27 on the 2-core CI machine while other work ran (load ~4.7; wall p99 is mostly waiting for a
core), 4,000 calls a row, p50 in us, wall / CPU of the loop thread / CPU of the process:
  no picture:                      main 78.7 / 80.9 / 81.4      current 82.3 / 84.6 / 85.2
  no picture, member keeping none: main 57.9 / 60.0 / 60.4      current 59.1 / 61.1 / 61.6
  picture, member keeping one:     main 78.5 / 80.7 / 81.3 (main ignores the picture)
  picture, member keeping none:    current 65.1 / 67.2 / 67.7 (nothing read)
  picture, its memory found:       current 515.7 / 235.4 / 520.0 (a 255 KB JPEG read and hashed in a worker)
  another picture + caption:       current 139.9 / 142.4 / 143.2 (another size: only its size looked at; the
                                   caption scored as text)
Disk per 255 KB JPEG: file + 12.7 KB thumbnail = 105 % of the original, plaintext; sealed 140 % at this commit's
base (a base64 token), +49 bytes per file once i24/pics's raw AES-GCM sealing (b1ad195) is merged. One put 17-30 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import io
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))
os.environ.setdefault("ASTRBOT_ROOT", tempfile.mkdtemp(prefix="bench-astrbot-"))

from bench_core import GROUP, build_group, percentiles  # noqa: E402

MEMBER = "ou_00500"  # keeps a memory with the picture
PLAIN_MEMBER = "ou_00501"  # keeps none
MESSAGE = "帮我看看这张图"


def photo(seed: int, size: tuple[int, int] = (1600, 1200), quality: int = 90) -> bytes:
    """A photo-like JPEG (gradients, shapes, sensor noise, slightly blurred) of a few hundred KB."""
    from PIL import Image, ImageDraw, ImageFilter

    rng = random.Random(seed)
    w, h = size
    noise = Image.effect_noise((w, h), 40).convert("L")
    ramp = Image.linear_gradient("L").resize((w, h))
    im = Image.merge("RGB", (ramp, noise, ramp.transpose(Image.Transpose.FLIP_LEFT_RIGHT)))
    draw = ImageDraw.Draw(im)
    for _ in range(300):
        x, y = rng.randrange(w), rng.randrange(h)
        box = [x, y, x + rng.randrange(20, 200), y + rng.randrange(20, 200)]
        draw.rectangle(box, fill=(rng.randrange(256), rng.randrange(256), rng.randrange(256)))
    im = im.filter(ImageFilter.GaussianBlur(0.8))
    out = io.BytesIO()
    im.save(out, format="JPEG", quality=quality)
    return out.getvalue()


def add_picture_memory(directory: Path, data: bytes) -> None:
    """Give MEMBER one memory keeping `data` (its description in the group's file, as a save leaves it)."""
    from memory._models import Attachment, GroupDocument, Memory, MemoryType
    from memory._storage import UserMemoryStore

    path = UserMemoryStore(directory).path_for(GROUP)
    doc = GroupDocument.model_validate_json(path.read_bytes())
    attachment = Attachment(hashlib.sha256(data).hexdigest(), "image", "image/jpeg", len(data), "photo.jpg", 1600, 1200)
    memory = Memory(
        id="f0000000-0000-4000-8000-000000000001",
        type=MemoryType.FACT,
        content="这是我们新办公室的平面图",
        created_at=1_700_000_100.0,
        updated_at=1_700_000_100.0,
        attachment=attachment,
    )
    doc.users[MEMBER].memories.append(memory)
    path.write_bytes(doc.model_dump_json(indent=1).encode())


async def bench_reply(directory: Path, pictures: dict[str, Path], iterations: int, baseline: str) -> dict:
    import astrbot.api.message_components as Comp
    from _previous import components, given, load_previous
    from astrbot.api import AstrBotConfig
    from astrbot.core.agent.message import TextPart
    from astrbot.core.provider.entities import ProviderRequest
    from astrbot.core.star.context import Context
    from conftest import load_plugin_package, make_event

    from memory._prompt import PICTURE_MATCH_NOTE

    def event(user: str, picture: Path | None):
        made = make_event(MESSAGE, group=GROUP.group_id, user=user)
        made.message_obj.message = [Comp.Plain(MESSAGE)]
        if picture is not None:
            made.message_obj.message.append(Comp.Image(file=str(picture), path=str(picture), url=str(picture)))
        return made

    caption = "<image_caption>一张办公室平面图，标出了会议室、工位和茶水间的位置</image_caption>"
    runs: dict[str, dict] = {}
    for label, main in ((f"main ({baseline})", load_previous(baseline)), ("current", load_plugin_package())):
        memory = sys.modules[f"{main.__package__}.memory"]
        from _previous import memory_name

        store = memory_name(main, "UserMemoryStore", "_storage")(directory)
        key = memory.GroupKey(GROUP.platform, GROUP.group_id)
        for user in (MEMBER, PLAIN_MEMBER):
            await store.memories(key, user)  # warm
        config = AstrBotConfig(config_path=str(directory / f"bench_config_{len(runs)}.json"), schema={})
        plugin = main.UserMemoryPlugin(Context(asyncio.Queue(), config, *([None] * 9)), config)
        components(plugin).store = store

        async def call(made, parts=(), plugin=plugin, expect: str | None = None):
            req = ProviderRequest(prompt=made.message_str, system_prompt="你是群聊助手。")
            req.extra_user_content_parts.extend(parts)
            await plugin.inject_memories(made, req)
            if expect is not None:
                assert expect in given(req), "the picture did not bring its memory back"

        paths = {
            "no picture": (call, (event(MEMBER, None),), {}),
            "no picture, a member keeping none": (call, (event(PLAIN_MEMBER, None),), {}),
        }
        if label == "current":
            paths["picture, a member keeping none"] = (call, (event(PLAIN_MEMBER, pictures["same"]),), {})
            paths["picture, its memory found"] = (
                call,
                (event(MEMBER, pictures["same"]),),
                {"expect": PICTURE_MATCH_NOTE},
            )
            paths["another picture + AstrBot's caption"] = (
                call,
                (event(MEMBER, pictures["other"]), (TextPart(text=caption),)),
                {},
            )
        else:
            paths["picture (main does not look at it)"] = (call, (event(MEMBER, pictures["same"]),), {})
        runs[label] = {name: (fn, args, kwargs, [], [], []) for name, (fn, args, kwargs) in paths.items()}
    rounds = 4
    for _ in range(rounds):  # alternating, so every path sees the same machine load
        for paths in runs.values():
            for fn, args, kwargs, wall, loop_cpu, cpu in paths.values():
                for _ in range(100):
                    await fn(*args, **kwargs)
                for _ in range(iterations // rounds):
                    c0, p0, t0 = time.thread_time_ns(), time.process_time_ns(), time.perf_counter_ns()
                    await fn(*args, **kwargs)
                    wall.append(time.perf_counter_ns() - t0)
                    loop_cpu.append(time.thread_time_ns() - c0)
                    cpu.append(time.process_time_ns() - p0)
    return {
        f"{name}, {label}": (*percentiles(w), *percentiles(lc), *percentiles(c))
        for label, paths in runs.items()
        for name, (_, _, _, w, lc, c) in paths.items()
    }


async def bench_disk(directory: Path, data: bytes, runs: int = 5) -> list[tuple[str, int, int, float]]:
    """(label, bytes of the kept file, bytes of its thumbnail, ms per put (median)) plaintext and sealed."""
    from memory import Settings
    from memory._pictures import AttachmentStore, check
    from memory._storage.crypto import new_key
    from memory._storage.factory import choose_encryption

    settings, _ = Settings.from_mapping({"privacy": {"encryption_key": new_key()}})
    rows = []
    for label, sealer in (("plaintext", None), ("sealed", choose_encryption(settings, {}).sealer())):
        times, blob, thumb = [], 0, 0
        for run in range(runs):
            store = AttachmentStore(directory / f"{label}-{run}", sealer)
            t0 = time.perf_counter()
            checked = await asyncio.to_thread(check, data, "photo.jpg", max_bytes=10 * 1024 * 1024)
            attachment = await store.put(GROUP, checked)
            times.append((time.perf_counter() - t0) * 1000)
            folder = store.group_dir(GROUP)
            blob = (folder / attachment.sha256).stat().st_size
            thumb = (folder / (attachment.sha256 + ".thumb")).stat().st_size
        rows.append((label, blob, thumb, statistics.median(times)))
    return rows


def print_reply(rows: dict) -> None:
    head = f"  {'':<52}{'wall':^24}{'CPU, event loop thread':^24}{'CPU, process':^24}"
    print(head)
    print(f"  {'path':<52}" + f"{'p50':>8}{'p99':>8}{'mean':>8}" * 3)
    for name, figures in rows.items():
        print(f"  {name:<52}" + "".join(f"{x:>8.1f}" for x in figures))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--per-member", type=int, default=20)
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--baseline", default="main", help="the commit the no-picture rows are compared with")
    args = parser.parse_args()

    same, other = photo(1), photo(2)
    with tempfile.TemporaryDirectory(prefix="bench-pictures-") as tmp:
        directory = Path(tmp)
        build_group(directory, args.members, args.per_member)
        add_picture_memory(directory, same)
        temp = directory / "astrbot_temp"  # where AstrBot's preprocessing leaves the message's pictures
        temp.mkdir()
        files = {"same": temp / "media_image_1.jpg", "other": temp / "media_image_2.jpg"}
        files["same"].write_bytes(same)
        files["other"].write_bytes(other)
        t0 = time.perf_counter()
        for _ in range(50):
            hashlib.sha256(same).hexdigest()
        sha_us = (time.perf_counter() - t0) / 50 * 1e6
        print(
            f"group: {args.members} members x {args.per_member} memories; pictures: JPEG 1600x1200, "
            f"{len(same) / 1024:.0f} KB and {len(other) / 1024:.0f} KB; sha256 of one: {sha_us:.0f} us"
        )
        print(f"\non_llm_request, warm group, {args.iterations} calls per row (microseconds):")
        print_reply(await bench_reply(directory, files, args.iterations, args.baseline))

        print("\ndisk per picture kept (one file per group, whatever the number of memories keeping it):")
        for label, blob, thumb, ms in await bench_disk(directory / "disk", same):
            total = blob + thumb
            print(
                f"  {label:<10} file {blob / 1024:7.1f} KB + thumbnail {thumb / 1024:5.1f} KB = {total / 1024:7.1f} KB"
                f" ({total / len(same) * 100:.1f} % of the original); one put (check, thumbnail, write, fsync) "
                f"{ms:.1f} ms"
            )
        from memory._models import Attachment

        described = Attachment(
            hashlib.sha256(same).hexdigest(), "image", "image/jpeg", len(same), "photo.jpg", 1600, 1200
        )
        caption = "这张图片显示了一间办公室的平面图，标出了会议室、工位、茶水间和出口的位置，左侧是窗户。" * 2
        plain = len(json.dumps(described.to_dict(), ensure_ascii=False).encode())
        with_caption = len(json.dumps(described.with_caption(caption).to_dict(), ensure_ascii=False).encode())
        print(
            f"  the memory's description in the group's file: {plain} bytes, {with_caption} bytes with a caption of "
            f"{len(caption)} characters (sealed: the content token grows by about as much)"
        )


if __name__ == "__main__":
    asyncio.run(main())
