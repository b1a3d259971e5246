"""report.html in a real browser at 1400 px: nothing overflows sideways (issue 21).

On main 9af789c the page opened with an 80-row metrics table that ran off
the right edge at 1400 px. This renders the page of a real three-policy run
in headless Chromium (Debian's ``chromium``; skipped where it is missing),
with the folded full table opened as well, and reads the page's scroll width
back from the DOM.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cosim.__main__ import main
from cosim.report import write_report

ROOT = Path(__file__).resolve().parents[1]
BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
WIDTH = 1400

pytestmark = pytest.mark.skipif(BROWSER is None, reason="no chromium to render the page")

#: Appended to a copy of the page: opens every <details>, then writes what
#: the browser laid out into the DOM, which --dump-dom prints.
PROBE = """<script>
for (const d of document.querySelectorAll("details")) d.open = true;
const widest = [...document.querySelectorAll("body *")]
  .map(e => [e.getBoundingClientRect().right, e.tagName + "#" + e.id])
  .sort((a, b) => b[0] - a[0])[0];
document.body.setAttribute("data-scroll-width", document.documentElement.scrollWidth);
document.body.setAttribute("data-widest", widest[1] + "@" + Math.round(widest[0]));
</script>"""


def _laid_out(page: Path, tmp: Path) -> dict[str, str]:
    probe = tmp / "probe.html"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"),
                     encoding="utf-8")
    proc = subprocess.run([BROWSER, "--headless", "--no-sandbox", "--disable-gpu",
                           "--hide-scrollbars", f"--window-size={WIDTH},2400",
                           "--virtual-time-budget=5000", "--dump-dom", probe.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = dict(re.findall(r'data-(scroll-width|widest)="([^"]*)"', proc.stdout))
    assert "scroll-width" in found, proc.stdout[:2000]
    return found


def test_the_page_of_a_run_fits_1400_px_with_every_table_unfolded(tmp_path):
    out = tmp_path / "run"
    assert main(["run", str(ROOT / "scenarios" / "lublin256.yaml"), "--set", "workload.jobs=200",
                 "--policy", "fcfs+easy", "--policy", "sjf+easy", "--policy",
                 "f1+conservative", "--out", str(out), "--quiet"]) == 0
    found = _laid_out(out / "report.html", tmp_path)
    assert int(found["scroll-width"]) <= WIDTH, found


def test_many_policies_with_long_names_fit_1400_px(tmp_path):
    # Names with no break opportunity, as predictor and agent policies have.
    from test_report import make_comparison

    names = [f"sjf+conservative@xgboost+kill-{i}" for i in range(8)]
    root = make_comparison(tmp_path / "cmp", names)
    write_report(root)
    found = _laid_out(root / "report.html", tmp_path)
    assert int(found["scroll-width"]) <= WIDTH, found
