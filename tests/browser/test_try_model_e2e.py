""""Try the model" in a real browser (headless Debian chromium): on a completed run's page, upload an
array of three digits and see each sample's top 5 classes as a table. The run is completed without
training (tests/portal/test_try_model.py: its generated data.py and a model.onnx of random
weights); the page's values are checked against core.prediction there, this test sees them shown."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
from playwright.sync_api import expect
from sklearn.datasets import load_digits

from schedulers.registry.runs import RunRegistry
from tests.browser.conftest import ARTIFACTS, OPEN_PAGES, PROXY_SECRET, SECRET_HEADER, USER_HEADER
from tests.browser.ui import RUN_COUNTER, act, shot, wait_text
from tests.portal.test_try_model import completed_run

pytestmark = pytest.mark.browser

VIEWPORT = {"width": 1600, "height": 1300}
USER = "tess"


def test_an_uploaded_array_shows_its_top_5_on_the_runs_page(portal, browser):
    run = completed_run(RunRegistry(home=portal.home), user=USER)
    buf = io.BytesIO()
    np.save(buf, load_digits().images[:3])
    context = browser.new_context(viewport=VIEWPORT, extra_http_headers={USER_HEADER: USER,
                                                                         SECRET_HEADER: PROXY_SECRET})
    context.add_init_script(RUN_COUNTER)
    page = context.new_page()
    OPEN_PAGES.append(page)
    page.goto(portal.url)
    wait_text(page, f"Signed in as {USER}", exact=False, timeout=90_000)
    act(page, page.get_by_role("link", name="Runs").click)
    wait_text(page, re.compile(rf"Run {re.escape(run.id)} — COMPLETED"))
    wait_text(page, "Try the model")
    uploader = page.locator('[data-testid="stFileUploader"]').filter(has_text="Images, .npy").locator(
        'input[type="file"]')
    act(page, lambda: uploader.set_input_files(files=[{"name": "three.npy", "mimeType": "application/octet-stream",
                                                        "buffer": buf.getvalue()}]))
    act(page, page.get_by_role("button", name="Predict", exact=True).click, timeout=120_000)
    wait_text(page, re.compile(r"^three\.npy\[0\]: class \d$"))
    table = page.locator('[data-testid="stTable"]').filter(has_text="probability")
    rows = table.locator("tbody tr")
    # the heading and the table are two deltas of one script run: the table may reach the page a frame
    # after the heading the wait above saw (CI saw 0 rows there once), so its rows are awaited too
    expect(rows).to_have_count(5, timeout=30_000)
    probabilities = [float(rows.nth(i).locator("td").last.inner_text()) for i in range(5)]
    assert probabilities == sorted(probabilities, reverse=True) and 0 < sum(probabilities) <= 1.0001
    shot(page, ARTIFACTS, "40-try-the-model")
    context.close()
