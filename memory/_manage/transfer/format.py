"""The export format's names and the bounds of what an import reads."""

from __future__ import annotations


EXPORT_FORMAT = "astrbot_plugin_user_memory.export"
EXPORT_VERSION = 1
READABLE_EXPORT_VERSIONS = frozenset({1})
MAX_IMPORT_DEPTH = 64  # nesting levels of JSON (an export needs about 10; extra fields of newer versions add some)
MAX_IMPORT_BYTES = 16 * 1024 * 1024
# A file carrying pictures and documents (base64, a third larger than the files): up to 128 MiB, read whole (the
# page sends it as one JSON request); the memories, todos and episodes in it are bounded as in any other file.
MAX_IMPORT_WITH_FILES_BYTES = 128 * 1024 * 1024
# LivingMemory's files (its export keeps every memory's metadata and often its source messages; its database adds
# its indexes): 10,000 memories with source messages make ~20 MB. Read into slim records, one row at a time.
MAX_LIVINGMEMORY_BYTES = 32 * 1024 * 1024
MAX_IMPORT_ITEMS = 100_000
MAX_IMPORT_GROUPS = 10_000

EXPORT_KIND = "export"  # what an export section's token is sealed as
NEW, DUPLICATE, CONFLICTING, INVALID = "new", "duplicate", "conflicting", "invalid"


# A file as the page sends it: its text (kept as it came: a copy as bytes would hold a large file twice more, the
# bytes and the text json.loads decodes them back to), or the bytes of a binary file (base64 in the request).
Upload = bytes | str


class ImportRefused(ValueError):
    """The file as a whole cannot be imported (too large, not JSON, not a format this version reads)."""
