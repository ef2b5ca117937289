"""What keeping a picture with a memory costs (issue 24): the save through the service (`tools.save_memory`, as
the adapter calls it, bytes already read off the event) for a text memory on main (the baseline, imported beside
this checkout: bench/_previous.py) and on this branch, and for a memory with a picture (a 1920x1080 JPEG
screenshot, a 4000x3000 JPEG photo, a 1280x720 PNG), plaintext and sealed; and the disk each picture takes
(the file, its thumbnail, sealed or not). Each row: wall time per save and the event-loop thread's CPU per save
(thread_time: the picture's check and thumbnail run in a worker thread, off the loop), medians of --rounds, with
the load average. The reply path is not touched by a save; its cost with a picture in the message is the recall
work's bench.

Run: .venv/bin/python bench/bench_picture_saves.py [--saves 30] [--rounds 3] [--previous COMMIT]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

os.environ.setdefault("ASTRBOT_ROOT", tempfile.mkdtemp(prefix="bench-astrbot-"))  # main's plugin imports AstrBot

from _previous import previous_memory  # noqa: E402
from PIL import Image, ImageDraw  # noqa: E402

import memory as current  # noqa: E402
from memory._storage.crypto import new_key  # noqa: E402

MAIN = "bb0b61b"  # the main this branch starts from


def screenshot(width: int, height: int, fmt: str, seed: int) -> bytes:
    image = Image.new("RGB", (width, height), (245, 245, 245))
    draw = ImageDraw.Draw(image)
    rnd = random.Random(seed)
    for _ in range(400):
        x, y = rnd.randrange(width), rnd.randrange(height)
        color = (rnd.randrange(256), rnd.randrange(256), rnd.randrange(256))
        draw.rectangle([x, y, x + rnd.randrange(200), y + rnd.randrange(40)], fill=color)
    for _ in range(300):
        draw.text((rnd.randrange(width), rnd.randrange(height)), "database api gateway", fill=(0, 0, 0))
    out = io.BytesIO()
    image.save(out, format=fmt, quality=85)
    return out.getvalue()


def photo(seed: int) -> bytes:
    random.seed(seed)
    image = Image.effect_noise((4000, 3000), 40 + seed % 20).convert("RGB")
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=85)
    return out.getvalue()


def ports(package):
    async def send(origin, message):
        return True

    async def generate(system_prompt, prompt, *, provider_id, origin):
        raise RuntimeError("no model in this bench")

    async def roster(speaker):
        return None

    return package.Ports(send, generate, roster, lambda: {}, lambda provider_id: None)


def speaker(package, user: str):
    return package.Speaker(
        package.MemberKey(package.GroupKey("lark", "oc_bench"), user), user, False, "lark_bot", "o", "m"
    )


async def run_saves(package, settings: dict, saves: int, pictures: list[bytes] | None) -> tuple[float, float, Path]:
    directory = Path(tempfile.mkdtemp(prefix="bench-pictures-"))
    built, _ = package.Settings.from_mapping({"memory_max_per_user": 1000, **settings})
    service = package.MemoryService(built, directory, ports(package))
    service.gc_freeze = False  # the host's heap is not this bench's
    await service.start()
    wall = cpu = 0.0
    for i in range(saves):
        who = speaker(package, f"ou_{i % 10}")
        args = {}
        if pictures is not None:
            args["attachments"] = [current.IncomingAttachment(pictures[i % len(pictures)], f"图{i}.jpg")]
        t0, c0 = time.perf_counter(), time.thread_time()
        answer = await service.tools.save_memory(
            who, memory_type="fact", content=f"第{i}条：部署架构图里的数据库", **args
        )
        wall += time.perf_counter() - t0
        cpu += time.thread_time() - c0
        assert "已保存" in answer, answer
    await service.stop()
    return wall / saves * 1e3, cpu / saves * 1e3, directory


def disk(directory: Path) -> int:
    root = directory / "attachments"
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) if root.exists() else 0


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--saves", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--previous", default=MAIN)
    args = parser.parse_args()
    previous = previous_memory(args.previous)
    key = {"privacy": {"encryption_key": new_key()}}
    shots = [screenshot(1920, 1080, "JPEG", seed) for seed in range(args.saves)]
    pngs = [screenshot(1280, 720, "PNG", seed) for seed in range(5)]
    photos = [photo(seed) for seed in range(3)]
    rows = [
        ("text, main (baseline)", previous, {}, None),
        ("text, this branch", current, {}, None),
        ("text, this branch, sealed", current, key, None),
        ("+ JPEG screenshot 1920x1080", current, {}, shots),
        ("+ JPEG screenshot, sealed", current, key, shots),
        ("+ PNG screenshot 1280x720", current, {}, pngs),
        ("+ JPEG photo 4000x3000", current, {}, photos),
    ]
    results: dict[str, list[tuple[float, float]]] = {label: [] for label, *_ in rows}
    sizes: dict[str, int] = {}
    for label, package, settings, pictures in rows:  # warm-up: imports, Pillow's decoders, first files
        await run_saves(package, settings, 2, pictures)
    for _ in range(args.rounds):  # rounds alternate, so every row sees the same load
        for label, package, settings, pictures in rows:
            wall, cpu, directory = await run_saves(package, settings, args.saves, pictures)
            results[label].append((wall, cpu))
            if pictures is not None:
                sizes[label] = disk(directory) // len({p for p in pictures[: args.saves]})
    print(f"saves per row: {args.saves}, rounds: {args.rounds}, load average {os.getloadavg()[0]:.2f}")
    print(f"{'':32} {'wall ms/save':>13} {'loop CPU ms/save':>17} {'disk per picture':>17}")
    for label, _, _, pictures in rows:
        wall = statistics.median(w for w, _ in results[label])
        cpu = statistics.median(c for _, c in results[label])
        size = f"{sizes[label] / 1024:.0f} KB" if label in sizes else ""
        print(f"{label:32} {wall:13.2f} {cpu:17.2f} {size:>17}")
    for label, group in (("JPEG screenshot", shots[:5]), ("PNG screenshot", pngs), ("JPEG photo", photos)):
        print(f"{label}: original {statistics.mean(map(len, group)) / 1024:.0f} KB on average")


if __name__ == "__main__":
    asyncio.run(main())
