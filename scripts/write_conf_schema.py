"""Write `_conf_schema.json` (AstrBot's plugin config page) from `memory/_settings_layout.py`, where the sections,
labels and hints live next to the settings' defaults and ranges. `tests/test_settings_page.py` fails when the file
and the layout differ: run `python scripts/write_conf_schema.py` after changing either."""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from memory._settings_layout import conf_schema  # noqa: E402


def schema_text() -> str:
    return json.dumps(conf_schema(), ensure_ascii=False, indent=2) + "\n"


if __name__ == "__main__":
    (REPO / "_conf_schema.json").write_text(schema_text(), encoding="utf-8")
