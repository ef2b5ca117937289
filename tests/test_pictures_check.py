"""What a file must be to be kept with a memory (`memory/_pictures/check.py`): found from its bytes, never its name;
each refusal says why in a sentence the model can relay."""

from __future__ import annotations

import hashlib
import io

import pytest
from picture_kit import ELF, SVG, animated_gif, big_but_small_png, bomb, pdf, picture, truncated_jpeg, zip_as_png
from PIL import Image

from memory._pictures import AttachmentRefused, check, make_thumbnail, safe_name

MB = 1024 * 1024


@pytest.mark.parametrize(
    ("fmt", "mime", "name"),
    [
        ("PNG", "image/png", "a.png"),
        ("JPEG", "image/jpeg", "a.jpg"),
        ("GIF", "image/gif", "a.gif"),
        ("WEBP", "image/webp", "a.webp"),
    ],
)
def test_the_four_picture_formats_a_browser_shows_are_kept_with_their_dimensions(fmt, mime, name):
    data = picture(fmt, (64, 48))
    kept = check(data, name, max_bytes=MB)
    a = kept.attachment
    assert (a.kind, a.mime, a.width, a.height, a.size, a.name) == ("image", mime, 64, 48, len(data), name)
    assert a.sha256 == hashlib.sha256(data).hexdigest() and kept.data is data


def test_the_content_decides_the_type_and_the_name_follows_it():
    a = check(picture("PNG"), "scan.jpg", max_bytes=MB).attachment
    assert (a.mime, a.name) == ("image/png", "scan.png")
    assert check(picture("JPEG"), "", max_bytes=MB).attachment.name == "图片.jpg"
    assert check(animated_gif(), "dance.gif", max_bytes=MB).attachment.mime == "image/gif"


def test_plain_documents_are_kept():
    text = "部署架构：数据库用 PostgreSQL\n".encode()
    a = check(text, "架构.md", max_bytes=MB).attachment
    assert (a.kind, a.mime, a.name, a.width) == ("document", "text/markdown", "架构.md", 0)
    assert check("\ufeffa,b\n1,2\n".encode(), "t.csv", max_bytes=MB).attachment.mime == "text/csv"
    assert check(pdf(), "报告.pdf", max_bytes=MB).attachment.mime == "application/pdf"


@pytest.mark.parametrize(
    ("data", "name", "code", "says"),
    [
        (SVG, "logo.svg", "attachment_svg", "SVG"),
        (ELF, "a.png", "attachment_executable", "可执行"),
        (b"MZ\x90\x00" + bytes(60), "setup.exe", "attachment_executable", "可执行"),
        (b"#!/bin/sh\nrm -rf /\n", "run.txt", "attachment_executable", "可执行"),
        (zip_as_png(), "photo.png", "attachment_archive", "压缩包"),
        (truncated_jpeg(), "half.jpg", "attachment_broken", "不完整"),
        (picture("PNG")[:-30], "cut.png", "attachment_broken", "不完整"),
        (b"just text", "fake.png", "attachment_broken", "不是可识别的图片"),
        (b"%PDF-1.4\n1 0 obj", "cut.pdf", "attachment_broken", "不完整"),
        (b"", "empty.txt", "attachment_empty", "空文件"),
        (b"\xff\xfe\xfa", "notes.txt", "attachment_text", "UTF-8"),
        (b"a\x00b", "notes.txt", "attachment_text", "二进制"),
        (b"hello", "notes", "attachment_type", "没有扩展名"),
        (b"<html><script></script></html>", "page.html", "attachment_type", ".html"),
        (b"BM" + bytes(60), "a.bmp", "attachment_type", "BMP"),
    ],
)
def test_bad_input_is_refused_with_a_reason(data, name, code, says):
    with pytest.raises(AttachmentRefused) as refused:
        check(data, name, max_bytes=MB)
    assert refused.value.code == code and says in str(refused.value), str(refused.value)


def test_a_decompression_bomb_is_refused_from_its_header_without_touching_pillows_global_limit():
    limit = Image.MAX_IMAGE_PIXELS
    data = bomb()
    assert len(data) < 200_000  # small on disk
    for bad in (data, big_but_small_png()):
        with pytest.raises(AttachmentRefused) as refused:
            check(bad, "bomb.png", max_bytes=10 * MB)
        assert refused.value.code == "attachment_bomb"
    assert Image.MAX_IMAGE_PIXELS == limit


def test_a_picture_too_large_to_check_is_refused_from_its_header_without_decoding(monkeypatch):
    """Issue 32 item 9: an 85 KB 7000x7000 WebP took 330 MiB and 1.3 s to check. A WebP (whose decoder holds about
    16 bytes a pixel) over 10 megapixels, any other picture over 40, is refused from its header: nothing decoded."""
    from PIL import ImageFile

    webp = picture("WEBP", (3200, 3200))  # 10.24 M pixels: a few KB
    out = io.BytesIO()
    Image.new("1", (2000, 20_001)).save(out, format="PNG")  # 40.002 M pixels: a long screenshot's worth and more
    tall = out.getvalue()

    def decoded(self):
        raise AssertionError("the picture was decoded")

    monkeypatch.setattr(ImageFile.ImageFile, "load", decoded)
    monkeypatch.setattr(Image.Image, "load", decoded)
    for data, name, size, bound in (
        (webp, "big.webp", "3200×3200", "10 百万像素"),
        (tall, "long.png", "2000×20001", "40"),
    ):
        with pytest.raises(AttachmentRefused) as refused:
            check(data, name, max_bytes=10 * MB)
        assert refused.value.code == "attachment_bomb"
        assert size in str(refused.value) and f"最多 {bound}" in str(refused.value), str(refused.value)


def test_a_jpeg_is_checked_at_a_fraction_of_its_size_and_keeps_its_own():
    """A JPEG is decoded at 1/8 scale (every byte still read): its dimensions are the picture's own, and one cut
    short is still refused."""
    data = picture("JPEG", (2400, 1600))
    kept = check(data, "photo.jpg", max_bytes=10 * MB).attachment
    assert (kept.width, kept.height) == (2400, 1600)
    with pytest.raises(AttachmentRefused) as refused:
        check(data[: len(data) - 200], "photo.jpg", max_bytes=10 * MB)
    assert refused.value.code == "attachment_broken"


def test_a_full_resolution_phone_photo_is_kept():
    """A 48-megapixel JPEG (a phone's full-resolution mode) is over the PNG cap but kept: checked at 1/8 scale."""
    out = io.BytesIO()
    Image.new("L", (8000, 6000)).save(out, format="JPEG")
    kept = check(out.getvalue(), "photo.jpg", max_bytes=10 * MB).attachment
    assert (kept.width, kept.height) == (8000, 6000)


def test_a_file_over_the_cap_is_refused_by_its_size():
    data = picture("PNG", (300, 300))
    with pytest.raises(AttachmentRefused) as refused:
        check(data, "a.png", max_bytes=len(data) - 1)
    assert refused.value.code == "attachment_too_big" and "上限" in str(refused.value)
    assert check(data, "a.png", max_bytes=len(data)).attachment.size == len(data)


def test_names_lose_paths_and_invisible_characters():
    assert safe_name("../../etc/passwd") == "passwd"
    assert safe_name("C:\\Users\\a\\报告.pdf") == "报告.pdf"
    assert safe_name("photo\u202egpj.exe") == "photogpj.exe"
    assert safe_name("a\nb\tc.txt") == "a b c.txt"
    long = safe_name("很" * 200 + ".png")
    assert len(long) == 80 and long.endswith(".png")


def test_thumbnails_are_small_jpegs_and_documents_have_none():
    thumb = make_thumbnail(picture("PNG", (1200, 600)))
    assert thumb is not None and thumb[:3] == b"\xff\xd8\xff"
    with Image.open(io.BytesIO(thumb)) as im:
        assert max(im.size) == 256 and im.size == (256, 128)
    assert make_thumbnail(pdf()) is None
