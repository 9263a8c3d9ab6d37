"""The reports as GitHub shows them: each markdown file through GitHub's own markdown library (cmark-gfm, with
GitHub's extensions) into a page with GitHub's markdown CSS, opened in headless Chromium at a 780 px and a 900 px
window, every <details> opened. Prints, per report and width: the comment's width, each table wider than it (and by
how much), the text that reads like an escape artefact or that GitHub would turn into a mention or an issue link,
and a screenshot's path.

    python benchmarks/render.py                        # the committed and golden reports
    python benchmarks/render.py reports/x.md           # those files
    python benchmarks/render.py --shots /tmp/shots     # where the screenshots go (default: a temporary folder)

Needs what CI does not install (so this is a script, not a test): Chromium on PATH (Debian: `apt-get install
chromium`), `pip install cmarkgfm`, and npm to fetch github-markdown-css. Prints figures; asserts nothing; the exit
status is 1 when a table is wider than its comment or an artefact is found.

The comment's width is the window less GitHub's margins around a PR comment: 47 px, measured from a 900 px window's
853 px comment (the figure the issue "The comment a PR reader wants" gives); GitHub's page changes, so this is a
model of it, not GitHub itself.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from html import escape, unescape
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WINDOWS = (780, 900)
MARGINS = 47
CSS_PACKAGE = "github-markdown-css@5.9.0"
DEFAULT = [*sorted((ROOT / "reports").glob("*.md")), *sorted((ROOT / "tests" / "golden").glob("*.md"))]

# Run in the page once it is laid out: every table wider than the comment, and text GitHub would mangle or link.
MEASURE = r"""
<script>
window.addEventListener("load", () => {
  const body = document.querySelector(".markdown-body");
  // How narrow each table can get (every cell wrapped wherever it may): a copy laid out at min-content, so that a
  // table that fits says by how much.
  const narrowest = t => {
    const copy = t.cloneNode(true);
    copy.style.cssText = "position:absolute;visibility:hidden;width:min-content;max-width:none";
    body.appendChild(copy);
    const width = copy.scrollWidth;
    copy.remove();
    return width;
  };
  const tables = [...body.querySelectorAll("table")].map((t, i) => ({
    index: i, wide: t.scrollWidth, shown: t.clientWidth, narrowest: narrowest(t),
    head: [...t.querySelectorAll("th")].map(th => th.textContent.trim()).join(" | ").slice(0, 80)}));
  const texts = [];
  const walker = document.createTreeWalker(body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode;
    if (!node.parentElement.closest("code, pre")) texts.push(node.textContent);
  }
  const links = [...body.querySelectorAll("a")].map(a => a.getAttribute("href"));
  const result = {comment: body.clientWidth, tables, texts, links};
  document.body.innerHTML = "<pre id=result></pre>";
  document.getElementById("result").textContent = JSON.stringify(result);
});
</script>
"""

ARTEFACTS = {
    "a backslash left before punctuation": r"\\[_*|`#\[\]()<>-]",
    "an escaped character in a link": r"%5C",
    "an HTML entity shown as text": r"&(amp|lt|gt|quot|#\d+);",
    "a tag shown as text": r"</?(br|wbr|details|summary|code|sub|sup)\b",
}
LINKED_BY_GITHUB = {"a mention": r"(?<![\w`])@[A-Za-z0-9][\w-]*", "an issue link": r"(?<![\w&`/])#\d+\b"}


def css(cache: Path) -> Path:
    """GitHub's markdown CSS (the light theme), fetched once with npm into the cache folder."""
    found = cache / "package" / "github-markdown-light.css"
    if not found.exists():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "pack", CSS_PACKAGE], cwd=cache, check=True, capture_output=True)
        archive = next(cache.glob("github-markdown-css-*.tgz"))
        subprocess.run(["tar", "xzf", archive.name], cwd=cache, check=True)
    return found


def page(markdown: str, style: str, width: int, measure: bool = True) -> str:
    """The report as GitHub renders it, inside a comment `width` px wide, every collapsed part open (and, to be
    measured, the script that measures it)."""
    import cmarkgfm
    from cmarkgfm.cmark import Options

    html = cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)
    html = html.replace("<details>", "<details open>")
    return (
        f"<!doctype html><html><head><meta charset=utf-8><style>{style}</style></head>"
        f'<body style="margin:0"><article class="markdown-body" style="box-sizing:border-box;width:{width}px;'
        f'padding:16px">{html}</article>{MEASURE if measure else ""}</body></html>'
    )


def chromium(*arguments: str) -> str:
    command = [shutil.which("chromium") or "chromium", "--headless", "--no-sandbox", "--disable-gpu"]
    command += ["--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"]
    done = subprocess.run([*command, *arguments], capture_output=True, text=True, timeout=120)
    return done.stdout


def measured(html: Path, window: int) -> dict:
    """What the measuring script found, read from the page's DOM after it ran."""
    dom = chromium(f"--window-size={window},2000", "--virtual-time-budget=5000", "--dump-dom", html.as_uri())
    start, end = dom.index('<pre id="result">') + len('<pre id="result">'), dom.rindex("</pre>")
    return json.loads(unescape(dom[start:end]))


def findings(result: dict) -> list[str]:
    """Each table wider than the comment, each artefact and each text GitHub would link, one line each."""
    lines = [
        f"table {t['index'] + 1} ({t['head']}) is {t['wide']} px wide in a {t['shown']} px comment"
        for t in result["tables"]
        if t["wide"] > t["shown"] + 1
    ]
    text = "\n".join(result["texts"])
    for what, pattern in {**ARTEFACTS, **LINKED_BY_GITHUB}.items():
        lines += [
            f"{what}: {m.group(0)!r} in …{text[max(0, m.start() - 30) : m.end() + 30]!r}…"
            for m in re.finditer(pattern, text)
        ]
    lines += [f"an escaped link: {href}" for href in result["links"] if href and "%5C" in href]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="*", type=Path, default=DEFAULT)
    parser.add_argument("--shots", type=Path, default=None, help="folder for the screenshots")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir(), "compat-matrix-render"))
    options = parser.parse_args()
    style = css(options.cache).read_text()
    shots = options.shots or Path(tempfile.mkdtemp(prefix="compat-matrix-shots-"))
    shots.mkdir(parents=True, exist_ok=True)
    failed = False
    for report in options.reports:
        markdown = report.read_text()
        print(f"{report.relative_to(ROOT) if report.is_relative_to(ROOT) else report}: {len(markdown.encode())} bytes")
        for window in WINDOWS:
            html = options.cache / f"{report.stem}-{window}.html"
            html.write_text(page(markdown, style, window - MARGINS))
            result = measured(html, window)
            shown = html.with_suffix(".shot.html")
            shown.write_text(page(markdown, style, window - MARGINS, measure=False))
            shot = shots / f"{report.stem}-{window}.png"
            chromium(f"--window-size={window},1400", f"--screenshot={shot}", shown.as_uri())
            found = findings(result)
            failed |= bool(found)
            widest = max((t["wide"] for t in result["tables"]), default=0)
            narrow = max((t["narrowest"] for t in result["tables"]), default=0)
            tables = f"{len(result['tables'])} tables, widest {widest} px (at its narrowest, the widest {narrow} px)"
            print(f"  {window} px window, {result['comment']} px comment, {tables}: {len(found)} findings; {shot}")
            for line in found[:20]:
                print(f"    {escape(line, quote=False)}")
            if len(found) > 20:
                print(f"    … and {len(found) - 20} more")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
