"""Issue 32 item 9: the memory an import preview and a picture check take, before and after, in one run.

1. Previewing (and applying) a large import through the service (`Manager.preview_import` / `apply_import`, what
   the page's routes call): a real export of one group whose members saved `--pictures` pictures that do not
   compress (512x512 noise PNGs, ~1 MiB each, five a member, within the default caps), as the page uploads it (its
   text: the export writes Chinese as it is, so Python holds the text at two bytes a character). The text is read
   before measuring: what is printed is what the request adds on top of it.
2. Checking a picture (`_pictures.check`): the review's 85 KB 7000x7000 WebP, a 40-megapixel PNG (decoded at 4
   bytes a pixel), a 12-megapixel JPEG (a phone photo) and a 10-megapixel WebP (the largest of each the caps keep).

Each row runs in a fresh interpreter (resident memory does not shrink back within a process), on BEFORE = the code
at `--baseline` (extracted with `git archive`) and AFTER = this checkout. Printed: the peak of resident memory
during the call over what it was before (Linux's VmHWM, reset with /proc/self/clear_refs), what tracemalloc counts
at its peak (Python's allocations only: Pillow's pixels are not among them), and the wall time.

Measured 2026-12-06 (2 cores shared with other work, load ~9.8; 110 pictures, a 110.3 MiB export), peak RSS over
the start / tracemalloc peak / wall:
  preview              before +441 MiB / 441 MiB / 4.2 s    after +119 MiB / 112 MiB / 3.4 s
  apply                before +441 MiB / 441 MiB / 10.4 s   after +126 MiB / 112 MiB / 9.9 s
  webp 7000x7000 85 KB before +752 MiB / 189 MiB / 2.7 s    after +3.5 MiB / 2.2 MiB / 0.44 s (refused)
  png 40 MP 129 KB     before +153 MiB                      after +153 MiB (the largest kept: the bound)
  jpeg 12 MP 184 KB    before +46.5 MiB / 0.15 s            after +1.5 MiB / 0.06 s (decoded at 1/8 scale)
  webp 10 MP 17 KB     before +157 MiB                      after +157 MiB (the largest kept: the bound)
The import's text itself (220 MiB: two bytes a character) and what AstrBot's web layer holds of the request are
not counted; the preview now adds about its parsed JSON (the pictures' base64), released picture by picture.

Run: .venv/bin/python bench/bench_import_memory.py [--pictures 110 --baseline ad3e692]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import io
import json
import os
import random
import subprocess
import sys
import tarfile
import tempfile
import time
import tracemalloc
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BASELINE = "ad3e692"  # main when issue 32 was filed
GROUP = "oc_import"
PICTURES = {  # name -> (format, size, mode)
    "webp 7000x7000 (the review's)": ("WEBP", (7000, 7000), "RGB"),
    "png 40 MP": ("PNG", (6324, 6324), "RGB"),
    "jpeg 12 MP (phone photo)": ("JPEG", (4000, 3000), "RGB"),
    "webp 10 MP": ("WEBP", (3162, 3162), "RGB"),
}


def ports(now: float):
    from memory import ModelAnswer, Ports

    async def send(origin, message) -> bool:
        return True

    async def generate(system_prompt, prompt, *, provider_id, origin) -> ModelAnswer:
        return ModelAnswer('{"operations": []}', 1, 1)

    async def roster(speaker):
        return None

    return Ports(
        send=send,
        generate=generate,
        roster=roster,
        running_platforms=lambda: {"lark_bot": "lark"},
        embedding_model=lambda provider_id: None,
        clock=lambda: now,
        host_timezone=None,
    )


def service(data_dir: Path):
    from memory import MemoryService, Settings

    settings, _ = Settings.from_mapping({})
    return MemoryService(settings, data_dir, ports(1_765_000_000.0))


async def write_export(pictures: int, out: Path) -> None:
    """The page's export of a group whose members saved `pictures` noise pictures (this checkout's code)."""
    from PIL import Image

    from memory import GroupKey, IncomingAttachment, MemberKey, Speaker

    source = service(Path(tempfile.mkdtemp(prefix="bench-import-src-")))
    rng = random.Random(32)
    for n in range(pictures):
        picture = io.BytesIO()
        Image.frombytes("RGB", (512, 512), rng.randbytes(512 * 512 * 3)).save(picture, format="PNG")
        member = f"ou_{n // 5:04d}"
        who = Speaker(
            MemberKey(GroupKey("lark", GROUP), member),
            name=f"成员{n // 5}",
            is_admin=False,
            platform_id="lark_bot",
            origin=f"lark_bot:GroupMessage:{GROUP}",
            message_id="m",
        )
        answer = await source.tools.save_memory(
            who,
            memory_type="fact",
            content=f"第{n}张图：我们的部署架构",
            attachments=[IncomingAttachment(picture.getvalue(), f"架构{n}.png")],
        )
        assert "已保存" in answer, answer
    await source.group_index.flush()
    download = await source.manager.export("lark", GROUP, "", decrypted=True)
    with out.open("wb") as f:
        async for chunk in download.chunks:
            f.write(chunk)
    await source.store.close()


def write_pictures(directory: Path) -> None:
    from PIL import Image

    for n, (fmt, size, mode) in enumerate(PICTURES.values()):
        out = io.BytesIO()
        Image.new(mode, size, 1 if mode == "1" else (10, 20, 30)).save(out, format=fmt)
        (directory / f"{n}.{fmt.lower()}").write_bytes(out.getvalue())


# -- one measurement, in a fresh interpreter ------------------------------------------------------------------------
def resident() -> tuple[int, int]:
    """(resident now, peak since the last reset), in bytes."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) * 1024, int(fields["VmHWM"].split()[0]) * 1024


def measured(call) -> dict[str, float]:
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # the peak (VmHWM) starts again from now
    before, _ = resident()
    tracemalloc.start()
    start = time.perf_counter()
    outcome = call()
    wall = time.perf_counter() - start
    traced = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    _, peak = resident()
    return {"rss_mb": (peak - before) / 2**20, "traced_mb": traced / 2**20, "wall_s": wall, "outcome": outcome}


def child(args: argparse.Namespace) -> None:
    sys.path.insert(0, args.tree)
    if args.child == "picture":
        from memory._pictures import AttachmentRefused, check

        data = Path(args.file).read_bytes()

        def judged() -> str:
            try:
                kept = check(data, Path(args.file).name, max_bytes=10 * 2**20).attachment
                return f"kept {kept.width}x{kept.height}"
            except AttachmentRefused as exc:
                return f"refused ({exc.code})"

        print(json.dumps(measured(judged)))
        return
    content = Path(args.file).read_text(encoding="utf-8")
    target = service(Path(tempfile.mkdtemp(prefix="bench-import-dst-")))
    loop = asyncio.new_event_loop()

    def imported() -> str:
        if args.child == "preview":
            answer = loop.run_until_complete(target.manager.preview_import(content))
            return f"new {answer['groups'][0]['counts']['new']}, files {answer['groups'][0]['files']}"
        answer = loop.run_until_complete(target.manager.apply_import(content, user="bench"))
        return f"added {answer['groups'][0]['added']}"

    print(json.dumps(measured(imported)))


def extract(commit: str) -> Path:
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit], check=True, capture_output=True).stdout
    root = Path(tempfile.mkdtemp(prefix="bench-import-base-"))
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(root, filter="data")
    return root


def run(kind: str, file: Path, tree: str) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "--child", kind, "--file", str(file), "--tree", tree],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        sys.exit(f"{kind} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pictures", type=int, default=110)
    parser.add_argument("--baseline", default=BASELINE)
    parser.add_argument("--child", choices=("preview", "apply", "picture"), help=argparse.SUPPRESS)
    parser.add_argument("--file", help=argparse.SUPPRESS)
    parser.add_argument("--tree", default=str(REPO), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    sys.path.insert(0, str(REPO))
    work = Path(tempfile.mkdtemp(prefix="bench-import-"))
    export = work / "export.json"
    asyncio.run(write_export(args.pictures, export))
    write_pictures(work)
    trees = {"before": str(extract(args.baseline)), "after": str(REPO)}
    size = export.stat().st_size
    print(f"before = {args.baseline}, after = this checkout; {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    print(f"import: an export of {args.pictures} pictures, {size / 2**20:.1f} MiB (held as text before measuring)")
    rows = [(kind, kind, export) for kind in ("preview", "apply")]
    rows += [
        (f"check {name}", "picture", work / f"{n}.{fmt.lower()}")
        for n, (name, (fmt, _, _)) in enumerate(PICTURES.items())
    ]
    for label, kind, file in rows:
        if kind == "picture":
            print(f"{label} ({file.stat().st_size / 1024:.0f} KB)")
        else:
            print(label)
        for version, tree in trees.items():
            r = run(kind, file, tree)
            print(
                f"  {version:6s} peak RSS +{r['rss_mb']:7.1f} MiB  tracemalloc peak {r['traced_mb']:7.1f} MiB"
                f"  {r['wall_s']:6.2f} s  {r['outcome']}",
                flush=True,
            )


if __name__ == "__main__":
    main()
