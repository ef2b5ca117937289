"""Export and import of memories in the plugin's own schema-versioned format (README "导出、导入"); it must not know
HTTP, the service or AstrBot.

An export is one JSON object:

    {"format": "astrbot_plugin_user_memory.export", "export_version": 1, "exported_at": <unix seconds>,
     "plaintext": true, "groups": [<section>, ...]}

A section is a group document as the plugin stores it (`GroupDocument`: `platform`, `group_id`, `users`,
`group_memories`, `todos`, `archive`) plus the group's `episodes`; the platform's global memories are the section
with an empty `group_id`. An export holds every memory, todo and conversation summary it covers: treat the file as
the members' personal data.

With an encryption key configured an export is sealed unless the admin asks for a decrypted one: the head says
`"plaintext": false, "encryption": {"v": 1, "kid": <key id>}` and each section keeps only `platform`, `group_id`
and `user_id` readable, the rest in one token (`"sealed"`, kind "export", bound to the group and the member).
Only an installation holding that key imports it. A decrypted export says `"plaintext": true`.

Import takes such an export, or one group file of the plugin (version 1, sealed or not) or of design 000 (version
0: no `schema_version`, no `platform`; the platform is given with the import). Sealed parts are opened with the
configured keys; without the key that sealed them the import is refused (it would otherwise import empty
contents). It is previewed item by item (new,
duplicate, conflicting, invalid) and applied all-or-nothing per group: one commit and one transaction in the
group's change log per group, only the new items added. Imports go through the rules every other path enforces:
ids as `check_id` takes them, contents as the tools take them, and the caps (`Limits`). A group with an invalid
id or item, or whose new items would take an owner past a cap, is refused whole, saying why.

An imported todo's reminder goes to the group it is imported into, never to the session the file names: it is bound
to a platform instance running that group's adapter (`bind_reminders`); a todo whose pending reminder cannot be
bound refuses its group. Members' opt-outs (`opted_out`) travel with the group and are added on import.
"""

from .applying import Limits, apply_group, preview_group
from .export import export_bytes, export_stream
from .format import EXPORT_FORMAT, MAX_IMPORT_BYTES, MAX_IMPORT_DEPTH, ImportRefused
from .reading import ImportedGroup, read_import
from .upload import Reading, read_file, read_upload, uploaded, without_opted_out

__all__ = [
    "EXPORT_FORMAT",
    "ImportRefused",
    "ImportedGroup",
    "Limits",
    "MAX_IMPORT_BYTES",
    "MAX_IMPORT_DEPTH",
    "apply_group",
    "export_bytes",
    "export_stream",
    "preview_group",
    "read_file",
    "read_import",
    "read_upload",
    "Reading",
    "uploaded",
    "without_opted_out",
]
