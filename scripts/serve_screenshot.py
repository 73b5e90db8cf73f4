"""Headless-browser screenshots of `kycourt-pipeline serve` (not part of the suite).

Runs the demo (the simulated court, 200 documents) into a scratch folder
unless --workspace names an archive, serves it on a free port of 127.0.0.1,
and has Chromium (Debian's: `apt-get install chromium`) load the search page
for QUERY (what typing QUERY into the box and pressing Enter loads: the box
is a GET form), the document page of the first hit, and Datasette's tables;
one PNG each. It also checks, as the browser would follow it, that the first
hit's PDF link answers a PDF.

    .venv/bin/python scripts/serve_screenshot.py --out /tmp/serve
    .venv/bin/python scripts/serve_screenshot.py --workspace W --query '"due process"'
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from notebook_builder.cells.c00_config import load_config  # noqa: E402
from notebook_builder.cells.c20_store import LocalStore  # noqa: E402
from notebook_builder.cells.c98_search import start_serve  # noqa: E402

# Chromium as root, headless, on a machine with a closed network (no background connections).
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars", "--window-size=1400,1000")


def screenshot(browser: str, url: str, png: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="kycourt-chromium-") as profile:
        subprocess.run([browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--screenshot={png}", url],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspace", help="an archive's workspace (default: a fresh demo)")
    parser.add_argument("--query", default="restitution")
    parser.add_argument("--out", default="serve-screenshots", help="folder for the PNGs")
    args = parser.parse_args()
    browser = next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")
                    if shutil.which(name)), None)
    if browser is None:
        print("serve_screenshot: no Chromium on PATH (apt-get install chromium)", file=sys.stderr)
        return 2
    workspace = args.workspace
    if workspace is None:
        root = Path(tempfile.mkdtemp(prefix="kycourt-screenshot-"))
        subprocess.run([sys.executable, "-m", "notebook_builder", "demo", "--workspace", str(root), "--docs", "200"],
                       check=True, stdout=subprocess.DEVNULL)
        workspace = str(root / "workspace")
    cfg = load_config({"KY_WORKSPACE": workspace, "KY_STORE": str(Path(workspace).parent / "store")})
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    served = start_serve(cfg, 0, store=LocalStore(cfg.STORE) if Path(cfg.STORE).is_dir() else None)
    try:
        search = f"{served.url}/?q={urllib.parse.quote(args.query)}"
        page = urllib.request.urlopen(search, timeout=60).read().decode()
        found = re.search(r'<div class="hit"><h2><a href="([^"]+)">.*?<a href="([^"]+)">PDF</a>', page, re.S)
        pages = {"search": search, "tables": f"{served.url}/ky_court"}
        if found:
            pages["document"] = served.url + found.group(1)
            with urllib.request.urlopen(served.url + found.group(2), timeout=60) as pdf:
                kind, head = pdf.headers.get("content-type"), pdf.read(5)
            print(f"first hit's PDF link {found.group(2)}: {kind}, begins {head!r}")
        else:
            print(f"no hit for {args.query!r}")
        for name, url in pages.items():
            screenshot(browser, url, out / f"{name}.png")
            print(f"{name}: {url} -> {out / f'{name}.png'}")
    finally:
        served.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
