"""The folder layout ``predictors ingest`` reads is documented where users look.

It was once only in ``--help``; the guide's paragraph on ``ingest``
(``docs/guide/predictors.md``) must name every file it reads and every
batch-script suffix it looks for, so the two cannot drift apart.
"""

from __future__ import annotations

import re
from pathlib import Path

from predictors import ingest

ROOT = Path(__file__).resolve().parents[1]


def _ingest_paragraph() -> str:
    text = (ROOT / "docs" / "guide" / "predictors.md").read_text(encoding="utf-8")
    start = text.index("`ingest`\nsearches")
    return text[start:text.index("\n\n", start)]


def test_guide_names_every_file_ingest_reads():
    para = _ingest_paragraph()
    for name in ("INCAR", "OSZICAR", "OUTCAR", "POSCAR", "KPOINTS"):
        assert f"`{name}`" in para, name
    assert ".gz" in para


def test_guide_names_every_batch_script_suffix():
    para = _ingest_paragraph()
    named = set(re.findall(r"`\*(\.\w+)`", para))
    assert named == set(ingest._SCRIPT_SUFFIXES), (named, ingest._SCRIPT_SUFFIXES)
