"""The DSE page in a real headless browser (Chromium from Debian): every figure on it must render.

The page marks each image ``data-loaded="yes"`` when it loaded with a non-zero natural size (and the body
``data-figures="ok/total"``); ``chromium --headless --dump-dom`` runs the page's scripts and prints the DOM
after the load event. Chromium is found on PATH or installed with apt-get when running as root; the test is
skipped, saying why, only when neither works.
"""

import os
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium():
    for n in NAMES:
        path = shutil.which(n)
        if path:
            return path
    if hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True, env=env, timeout=600)
        subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], capture_output=True, env=env, timeout=1200)
        return shutil.which("chromium")
    return None


@pytest.fixture(scope="module")
def chromium():
    path = find_chromium()
    if path is None:
        pytest.skip("no Chromium on PATH and it cannot be installed here (not root or no apt-get)")
    return path


def headless(chromium, *args, timeout=120):
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files",
           "--virtual-time-budget=5000", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    out = tmp_path_factory.mktemp("dse")
    env = dict(os.environ, PYTHONPATH=ROOT)
    p = subprocess.run([sys.executable, "-m", "fuseflow.dse", "run", "orders", "-o", str(out), "--quiet"],
                       capture_output=True, text=True, cwd=ROOT, env=env)
    assert p.returncode == 0, p.stderr
    return out / "index.html"


def test_every_figure_renders(chromium, page):
    dom = headless(chromium, "--dump-dom", page.as_uri()).stdout
    imgs = re.findall(r"<img\b[^>]*>", dom)
    assert imgs, "the page has no figures"
    for tag in imgs:
        assert 'data-loaded="yes"' in tag, f"figure did not render: {tag}"
    n = len(imgs)
    assert f'data-figures="{n}/{n}"' in dom


def test_a_missing_figure_is_caught(chromium, page, tmp_path):
    # the check must be able to fail: the same page with its PNG gone
    broken = tmp_path / "index.html"
    shutil.copy(page, broken)
    dom = headless(chromium, "--dump-dom", broken.as_uri()).stdout
    assert 'data-loaded="no"' in dom and 'data-loaded="yes"' not in dom


def test_screenshot(chromium, page, tmp_path):
    shot = tmp_path / "page.png"
    headless(chromium, f"--screenshot={shot}", "--window-size=1000,1400", page.as_uri())
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
