"""A headless-browser screenshot of `kycourt-pipeline serve`'s search page (not part of the suite).

Runs the demo (the simulated court, 200 documents) into a scratch folder
unless --workspace names an archive, serves it with Datasette on a free port
of 127.0.0.1, and has Chromium (`apt-get install chromium`) take a
screenshot of the canned "search" query for QUERY.

    .venv/bin/python scripts/serve_screenshot.py --out /tmp/serve-search.png
    .venv/bin/python scripts/serve_screenshot.py --workspace W --query '"due process"'
"""
from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import sys
import tempfile
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from notebook_builder.cells.c00_config import load_config  # noqa: E402
from notebook_builder.cells.c98_search import start_serve  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspace", help="an archive's workspace (default: a fresh demo)")
    parser.add_argument("--query", default="appellant")
    parser.add_argument("--out", default="serve-search.png")
    parser.add_argument("--page", default="search", choices=("search", "docs", "documents"),
                        help="the canned search query, the index's table with its search box, or the documents table")
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
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process, url = start_serve(cfg, port)
    try:
        quoted = urllib.parse.quote(args.query)
        page = {"search": f"{url}/ky_search/search?q={quoted}",
                "docs": f"{url}/ky_search/docs?_search={quoted}",
                "documents": f"{url}/ky_court/documents"}[args.page]
        subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        "--window-size=1400,1000", f"--screenshot={Path(args.out).resolve()}", page],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    finally:
        process.terminate()
        process.wait(timeout=10)
    print(f"screenshot of {page} written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
