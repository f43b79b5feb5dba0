"""The report page in a real browser: headless Chromium (Debian's package) opens index.html of a
report built from the fixture folder, with no console message and no broken image, and its
screenshot shows the overview table where the page lays it out."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from matplotlib import image

from quicbed.report import ReportOptions, build_report
from report_fixtures import make_matrix_folder

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="chromium missing (scripts/install.sh installs it with the test packages: apt install chromium)",
)
WIDTH, HEIGHT = 1280, 1600
#: the page the report is opened in: it reports what the report's own page cannot (its images
#: and where its overview table is) into an element the DOM dump carries
PROBE = """<!doctype html><html><body style="margin:0">
<iframe id="report" src="REPORT" style="width:WIDTHpx;height:4000px;border:0"></iframe>
<pre id="seen">pending</pre>
<script>
document.getElementById("report").addEventListener("load", () => {
  const page = document.getElementById("report").contentDocument;
  const images = [...page.images];
  const heading = [...page.querySelectorAll("h2")].find(h => h.textContent.startsWith("Overview"));
  let table = heading;
  while (table && table.tagName !== "TABLE") { table = table.nextElementSibling; }
  const box = table ? table.getBoundingClientRect() : null;
  document.getElementById("seen").textContent = JSON.stringify({
    images: images.length,
    broken: images.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute("src")),
    table: box && {x: box.x, y: box.y, width: box.width, height: box.height, rows: table.rows.length}});
});
</script></body></html>"""


def _chromium(*args: str) -> subprocess.CompletedProcess[str]:
    # --no-sandbox: the tests run as root; --virtual-time-budget: wait for the page and its images
    return subprocess.run(
        [
            str(CHROMIUM),
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
            f"--window-size={WIDTH},{HEIGHT}",
            "--allow-file-access-from-files",
            "--virtual-time-budget=10000",
            "--enable-logging=stderr",
            "--v=0",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _console(stderr: str) -> list[str]:
    """The page's console messages (Chromium logs each one, errors included, as CONSOLE)."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def test_the_report_opens_whole_in_chromium(tmp_path: Path) -> None:
    folder = make_matrix_folder(tmp_path / "report")
    build_report(folder, ReportOptions())
    probe = tmp_path / "probe.html"
    probe.write_text(PROBE.replace("REPORT", (folder / "index.html").as_uri()).replace("WIDTH", str(WIDTH)))
    dumped = _chromium("--dump-dom", probe.as_uri())
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    found = re.search(r'<pre id="seen">(.*?)</pre>', dumped.stdout)
    assert found and found.group(1) != "pending", dumped.stdout[-2000:]
    seen = json.loads(found.group(1).replace("&quot;", '"'))
    assert seen["images"] >= 10 and seen["broken"] == [], seen
    assert not _console(dumped.stderr), _console(dumped.stderr)
    table = seen["table"]
    assert table is not None and table["rows"] == 7, seen  # a header and the six cells
    shot = tmp_path / "report.png"
    screenshot = _chromium(f"--screenshot={shot}", (folder / "index.html").as_uri())
    assert screenshot.returncode == 0 and shot.is_file(), screenshot.stderr[-2000:]
    assert not _console(screenshot.stderr), _console(screenshot.stderr)
    pixels = image.imread(shot)[..., :3]
    assert pixels.shape[:2] == (HEIGHT, WIDTH)
    top, left = int(table["y"]), int(table["x"])
    assert top + table["height"] <= HEIGHT, "the overview table is below the first screen"
    region = pixels[top : top + int(table["height"]), left : left + int(table["width"])]
    ink = (region.mean(axis=2) < 0.5).mean()  # share of dark pixels: text and rules
    assert 0.02 < ink < 0.4, f"the overview table's area is {ink:.1%} dark: not a table of text"
    blank = pixels[top : top + int(table["height"]), WIDTH - 40 : WIDTH - 10]
    assert (blank.mean(axis=2) < 0.5).mean() < 0.01  # the margin beside it stays empty


def test_a_broken_image_and_a_console_error_are_caught(tmp_path: Path) -> None:
    """The checks above can fail: an image removed and a script error added are both seen."""
    folder = make_matrix_folder(tmp_path / "report")
    build_report(folder, ReportOptions())
    (folder / "report" / "bars-goodput.png").unlink()
    page = folder / "index.html"
    page.write_text(page.read_text().replace("</body>", "<script>undefined_function();</script></body>"))
    probe = tmp_path / "probe.html"
    probe.write_text(PROBE.replace("REPORT", page.as_uri()).replace("WIDTH", str(WIDTH)))
    dumped = _chromium("--dump-dom", probe.as_uri())
    seen = json.loads(re.search(r'<pre id="seen">(.*?)</pre>', dumped.stdout).group(1).replace("&quot;", '"'))
    assert seen["broken"] == ["report/bars-goodput.png"]
    assert any("undefined_function is not defined" in line for line in _console(dumped.stderr))
