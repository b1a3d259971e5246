"""report.html in a real browser at 1400 px: what a reader sees first, and nothing sideways.

Renders the page of a real seven-policy run in headless Chromium (Debian's
``chromium``, an optional test dependency: skipped where it is missing) and
reads back from the DOM what the browser laid out: the title (the scenario,
not the list of policies), the seed the scenario gives (not one derived from
it), the page's height with the folded parts (Gantt charts, the full metrics
table) closed, and, with every part opened, that no element reaches past the
right edge (inside a box that scrolls sideways, a wide table may be wider,
the box may not). The page once ran off the right edge with an 80-row table, and
once was 9,900 pixels tall, half of it seven full-size Gantt charts.
"""

from __future__ import annotations

import json
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
#: Seven policies' page, folded parts closed: the headline table, seven small
#: radars, and the page-wide figures (about 3,800 px).
MAX_HEIGHT = 4600
POLICIES = ["fcfs+easy", "sjf+easy", "f1+easy", "saf+easy", "wfp3+easy", "unicef+easy",
            "fcfs+conservative"]

pytestmark = pytest.mark.skipif(BROWSER is None, reason="no chromium to render the page")

#: Appended to a copy of the page: measures the page as it opens, then opens
#: every <details> and measures again; writes both into the DOM, which
#: --dump-dom prints.
PROBE = """<script>
window.addEventListener("load", () => {
  const closed = document.documentElement.scrollHeight;
  const folded = [...document.querySelectorAll("details")].filter(d => !d.open).map(d => d.id);
  for (const d of document.querySelectorAll("details")) d.open = true;
  // inside a box that scrolls sideways (a wide table) an element may be wider: the box is not
  const widest = [...document.querySelectorAll("body *")]
    .filter(e => !e.parentElement.closest(".scroll"))
    .map(e => [e.getBoundingClientRect().right, e.tagName + "#" + e.id])
    .sort((a, b) => b[0] - a[0])[0];
  const images = [...document.querySelectorAll("img")]
    .map(i => [i.getAttribute("src"), i.naturalWidth, Math.round(i.getBoundingClientRect().width)]);
  document.body.setAttribute("data-layout", JSON.stringify({
    height: closed, folded: folded, title: document.title,
    h1: document.querySelector("h1").textContent,
    lede: (document.getElementById("lede") || {}).textContent || "",
    scrollWidth: document.documentElement.scrollWidth,
    widest: widest[1], widestRight: widest[0], images: images}));
});
</script>"""


def _laid_out(page: Path, screenshot: Path | None = None) -> dict:
    probe = page.with_name("probe.html")    # beside the page: its images load
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"),
                     encoding="utf-8")
    base = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--virtual-time-budget=5000"]
    proc = subprocess.run([*base, f"--window-size={WIDTH},2400", "--dump-dom", probe.as_uri()],
                          capture_output=True, text=True, timeout=120)
    probe.unlink()
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = re.search(r'data-layout="([^"]*)"', proc.stdout)
    assert found, proc.stdout[:2000]
    layout = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    if screenshot is not None:   # the page as a reader sees it, for a person to look at
        subprocess.run([*base, f"--window-size={WIDTH},{layout['height']}",
                        f"--screenshot={screenshot}", page.as_uri()],
                       capture_output=True, timeout=120, check=True)
    return layout


@pytest.fixture(scope="module")
def seven(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("browser") / "run"
    argv = ["run", str(ROOT / "scenarios" / "lublin256.yaml"), "--set", "workload.jobs=200",
            "--set", "seed=2", "--out", str(out), "--quiet"]
    for p in POLICIES:
        argv += ["--policy", p]
    assert main(argv) == 0
    return out


def test_seven_policies_page_is_titled_by_the_scenario_and_fits_1400_px(seven, tmp_path):
    shot = tmp_path / "report.png"
    layout = _laid_out(seven / "report.html", screenshot=shot)
    # the scenario names the page; its own seed is shown, not the generators' derived ones
    assert layout["title"] == layout["h1"] == "cosim report: lublin256"
    assert "Seed 2." in layout["lede"] and "7 policies" in layout["lede"]
    page = (seven / "report.html").read_text(encoding="utf-8")
    assert not re.search(r"seed=\d", page), re.findall(r".{40}seed=\d+", page)
    # what opens first is short: the Gantt charts and the full table wait, folded
    assert layout["folded"] == ["gantt-charts", "all-metrics"]
    assert layout["height"] <= MAX_HEIGHT, layout["height"]
    # with every part opened, nothing runs off the right edge
    assert layout["scrollWidth"] <= WIDTH, layout
    assert layout["widestRight"] <= WIDTH, layout
    # the page-wide figures fill the column at their own size (no empty third beside them)
    shown = {src: (natural, width) for src, natural, width in layout["images"]}
    for name in ("kiviat.png", "timeseries.png", "wait_bsld_cdf.png", "modes.png"):
        natural, width = shown[name]
        assert width >= 0.85 * (WIDTH - 100), (name, natural, width)
    assert shot.stat().st_size > 10_000


def test_many_policies_with_long_names_fit_1400_px(tmp_path):
    # Names with no break opportunity, as predictor and agent policies have.
    from test_report import make_comparison

    names = [f"sjf+conservative@xgboost+kill-{i}" for i in range(8)]
    root = make_comparison(tmp_path / "cmp", names)
    write_report(root)
    layout = _laid_out(root / "report.html")
    assert layout["scrollWidth"] <= WIDTH and layout["widestRight"] <= WIDTH, layout
