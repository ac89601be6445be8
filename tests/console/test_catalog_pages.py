"""The console's Apps, Library and Hooks pages in a real headless Chromium against a real host
of their own (runhost: daphne over TLS, Redis, Celery and the hook worker), fixture stores for
the library scanners and a real HTTP receiver for a webhook.

Each test does the operator's task end to end, checks the files and records the host wrote,
and leaves a screenshot in the test artifacts (tests/support/consolepage.py).
"""

from __future__ import annotations

import ipaddress
import json
import re

import pytest
from playwright.sync_api import expect

from tests.hooks import helpers
from tests.library import stores
from tests.support.consolepage import browser_page, logged_in, shot
from tests.support.livehost import start_host

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    sandbox = tmp_path_factory.mktemp("console-catalog")
    base = sandbox / "stores"
    base.mkdir()
    stores.make_steam(base, {570: "Dota 2"}, {292030: "The Witcher 3: Wild Hunt"})
    stores.make_heroic(base, {"Fortnite": "Fortnite"})
    stores.make_lutris(base, [(7, "Diablo II", 1)])
    cdn = stores.CDN()
    cdn.files["/steam/apps/570/library_600x900.jpg"] = stores.jpeg_bytes(color=(40, 40, 200))
    cdn.files["/steam/apps/292030/library_600x900.jpg"] = stores.jpeg_bytes(color=(30, 160, 30))
    env = {
        **stores.store_env(base),
        "HOST_ART_CDN_URL": cdn.url,
        "HOST_COVER_URL_PREFIX": cdn.url + "/covers/",
        "HOST_ART_FETCH_TIMEOUT_S": "5",
    }
    h = start_host(state_dir=sandbox / "state", env=env, wait=False)
    h.sandbox, h.stores = sandbox, base
    try:
        h.wait_ready(timeout=180)  # the planes import slowly on a loaded machine
        with browser_page(h) as page:
            h.page = logged_in(page)
            yield h
            assert page.script_errors == []
    finally:
        h.stop()
        cdn.close()


def _apps_file(host) -> dict:
    return json.loads((host.state_dir / "apps.json").read_text())


def test_apps_page_adds_an_app_with_a_cover_shows_a_400_at_its_field_edits_and_deletes(
    host, tmp_path
):
    page = host.page
    page.goto("/apps")
    expect(page.locator("#apps tbody tr[data-name=Desktop]")).to_be_visible()  # file made
    catalog = _apps_file(host)
    catalog["env"] = {"ROMS": "/srv/roms"}  # a hand edit of the file's top-level env
    (host.state_dir / "apps.json").write_text(json.dumps(catalog))
    page.reload()
    expect(page.locator("#catalog-env-count")).to_have_text("1")
    page.locator("#catalog-env summary").click()
    expect(page.locator("#catalog-env-list")).to_contain_text("/srv/roms")
    expect(page.locator("#next-connect-hint")).to_contain_text("next time the app is launched")
    expect(page.locator("#order-hint")).to_contain_text("sorted by name")
    expect(page.locator("#apps tbody tr[data-name=Desktop]")).to_be_visible()

    # Every field of the form, filled from the keyboard side (labels name the inputs).
    page.get_by_label("Name", exact=True).fill("Retro Arcade")
    page.get_by_label("Command", exact=True).fill("retroarch --fullscreen")
    page.get_by_label("Working directory").fill("/tmp")
    page.get_by_label("Output file").fill(str(tmp_path / "arcade.log"))
    page.get_by_label("Exit timeout").fill("9999")  # out of range: the API's 400
    page.get_by_label("Encoder preset").select_option("0")
    page.get_by_label("Skip the global prep commands").check()
    page.get_by_label("Wait for the whole process group").uncheck()
    page.click("#add-env")
    page.get_by_label("Variable 1 name").fill("ARCADE_MODE")
    page.get_by_label("Variable 1 value").fill("kiosk")
    page.click("#add-prep")
    page.get_by_label("Step 1: do").fill("xset s off")
    page.get_by_label("Step 1: undo").fill("xset s on")
    page.get_by_label("Started beside the app").fill("pulseaudio-helper --quiet")
    cover = tmp_path / "cover.jpg"
    cover.write_bytes(stores.jpeg_bytes(w=120, h=180, color=(0, 90, 220)))
    page.set_input_files("#f-cover", str(cover))
    expect(page.locator("#cover-preview")).to_be_visible()
    assert page.locator("#cover-preview").evaluate("img => img.naturalWidth") == 120
    page.click("#save")

    error = page.locator("#e-exit-timeout")
    expect(error).to_have_text("exit-timeout must be 0 to 3600 seconds")
    expect(page.get_by_label("Exit timeout")).to_have_attribute("aria-invalid", "true")
    assert not any(a["name"] == "Retro Arcade" for a in _apps_file(host)["apps"])
    shot(page, "apps-field-error")

    page.get_by_label("Exit timeout").fill("20")
    page.click("#save")
    expect(page.locator("#flash")).to_contain_text("Added Retro Arcade")
    row = page.locator("#apps tbody tr[data-name='Retro Arcade']")
    expect(row).to_be_visible()
    expect(row.locator("img.thumb")).to_be_visible()
    assert row.locator("img.thumb").evaluate("img => img.naturalWidth") > 0
    saved = next(a for a in _apps_file(host)["apps"] if a["name"] == "Retro Arcade")
    assert saved["cmd"] == "retroarch --fullscreen" and saved["working-dir"] == "/tmp"
    assert saved["output"] == str(tmp_path / "arcade.log")
    assert saved["exit-timeout"] == 20 and saved["encoder-preset"] == 0
    assert saved["exclude-global-prep-cmd"] is True and saved["wait-all"] is False
    assert saved["auto-detach"] is True and saved["elevated"] is False
    assert saved["env"] == {"ARCADE_MODE": "kiosk"}
    assert saved["prep-cmd"] == [{"do": "xset s off", "undo": "xset s on", "elevated": False}]
    assert saved["detached"] == ["pulseaudio-helper --quiet"]
    assert _apps_file(host)["env"] == {"ROMS": "/srv/roms"}  # the page's save kept it
    png = (host.state_dir / "covers" / "Retro Arcade.png").read_bytes()
    assert png.startswith(b"\x89PNG") and saved["image-path"].endswith("Retro Arcade.png")
    shot(page, "apps-added")

    # Edit: the form comes back filled; a refused field (elevated) shows its reason in place.
    row.get_by_role("button", name="Edit Retro Arcade").click()
    expect(page.get_by_label("Name", exact=True)).to_have_value("Retro Arcade")
    expect(page.get_by_label("Step 1: undo")).to_have_value("xset s on")
    expect(page.locator("#cover-preview")).to_be_visible()
    page.get_by_label("Elevated (Windows only").check()
    page.click("#save")
    expect(page.locator("#e-elevated")).to_contain_text("administrator on Windows")
    page.get_by_label("Elevated (Windows only").uncheck()
    page.get_by_label("Name", exact=True).fill("Arcade (Retro)")
    page.get_by_label("Remove step 1").click()
    page.get_by_label("Name", exact=True).press("Enter")  # submit from the keyboard
    expect(page.locator("#flash")).to_contain_text("Saved Arcade (Retro)")
    names = [a["name"] for a in _apps_file(host)["apps"]]
    assert names == sorted(names, key=str.encode) and "Retro Arcade" not in names
    edited = next(a for a in _apps_file(host)["apps"] if a["name"] == "Arcade (Retro)")
    assert "prep-cmd" not in edited or edited["prep-cmd"] == []
    assert edited["image-path"] == saved["image-path"]  # the cover stays

    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete Arcade (Retro)").click()
    expect(page.locator("#apps tbody tr[data-name='Arcade (Retro)']")).to_have_count(0)
    assert all(a["name"] != "Arcade (Retro)" for a in _apps_file(host)["apps"])


def test_library_page_shows_art_filters_rescans_per_store_and_edits_custom_entries(host):
    page = host.page
    page.goto("/library")
    dota = page.locator(".title-card[data-id='steam:570']")
    expect(dota).to_be_visible(timeout=30_000)  # the workers' first scan may still run
    expect(dota.locator("img.art")).to_be_visible()
    page.wait_for_function(
        "() => document.querySelector(\".title-card[data-id='steam:570'] img.art\")"
        "?.naturalWidth > 0"
    )  # the portrait came through the console session from the host's art route
    fortnite = page.locator(".title-card", has_text="Fortnite")
    expect(fortnite.locator("a.link")).to_have_attribute("href", re.compile("^https://cdn"))
    diablo = page.locator(".title-card", has_text="Diablo II")
    expect(diablo.locator(".placeholder")).to_be_visible()  # Lutris: no art of its own
    shot(page, "library-titles")

    filters = page.locator("#filters")
    filters.get_by_label("Store").select_option("steam")
    expect(page.locator(".title-card")).to_have_count(2)
    assert set(page.locator(".title-card").evaluate_all("cs => cs.map(c => c.dataset.store)")) == {
        "steam"
    }
    filters.get_by_label("Store").select_option("")
    filters.get_by_label("Title").fill("witch")
    expect(page.locator(".title-card")).to_have_count(2)  # Witcher 3 (steam), The Witcher (gog)
    filters.get_by_label("Title").fill("")

    # Rescan: a game installed since shows up; every store's row reaches `done`.
    stores.write_manifest(host.stores / "Steam", 10, "Counter-Strike")
    page.click("#rescan")
    expect(page.locator("#rescan-state")).to_have_text("Rescan finished.", timeout=60_000)
    for store in ("steam", "heroic", "lutris"):
        expect(page.locator(f"#scanners tr[data-store={store}]")).to_have_attribute(
            "data-state", "done"
        )
    expect(page.locator("#scanners tr[data-store=steam] td").nth(3)).to_have_text("3")
    expect(page.locator(".title-card[data-id='steam:10']")).to_be_visible()

    # A custom entry: the API's 400s land at their fields, then it saves with detect and prep.
    form = page.locator("#entry-form")
    form.get_by_label("Portrait").fill("ftp://example.com/zelda.png")
    form.get_by_label("Release year").fill("99999")
    page.click("#save-entry")
    expect(form.locator(".field-error[data-for=title]")).to_contain_text("blank")
    expect(form.locator(".field-error[data-for='art.portrait']")).to_have_text(
        "must be an http(s) URL"
    )
    expect(form.locator(".field-error[data-for=release_year]")).to_be_visible()
    expect(form.get_by_label("Title", exact=True)).to_be_focused()
    shot(page, "library-field-errors")
    form.get_by_label("Title", exact=True).fill("Zelda (SNES)")
    form.get_by_label("Portrait").fill("")
    form.get_by_label("Release year").fill("1991")
    form.get_by_label("Platform").fill("snes")
    form.get_by_label("Launch with").select_option("command")
    form.get_by_label("Launch value").fill("snes9x /roms/zelda.sfc")
    form.get_by_label("Executable").fill("/usr/bin/snes9x")
    form.get_by_label("Process name").fill("snes9x")
    page.click("#add-prep")
    form.get_by_label("Step 1: do").fill("pactl set-sink-volume @DEFAULT_SINK@ 60%")
    form.get_by_label("Step 1: undo").fill("pactl set-sink-volume @DEFAULT_SINK@ 100%")
    form.get_by_label("Genres").fill("action, adventure")
    page.click("#save-entry")
    expect(page.locator("#flash")).to_have_text("Added Zelda (SNES).")
    card = page.locator(".title-card[data-store=custom]", has_text="Zelda (SNES)")
    expect(card).to_be_visible()
    bare = card.get_attribute("data-id").split(":", 1)[1]
    with host.mgmt() as c:
        stored = c.get(f"/api/v1/library/custom/{bare}").json()
    assert stored["detect"] == {"exe": "/usr/bin/snes9x", "process_name": "snes9x"}
    assert stored["prep"] == [
        {"do": "pactl set-sink-volume @DEFAULT_SINK@ 60%",
         "undo": "pactl set-sink-volume @DEFAULT_SINK@ 100%"}
    ]  # fmt: skip
    assert stored["launch"] == {"kind": "command", "value": "snes9x /roms/zelda.sfc"}
    assert (stored["platform"], stored["release_year"], stored["genres"]) == (
        "snes",
        1991,
        ["action", "adventure"],
    )
    page.locator("#filters").get_by_label("Platform").select_option("snes")
    expect(page.locator(".title-card")).to_have_count(1)
    shot(page, "library")
    page.locator("#filters").get_by_label("Platform").select_option("")

    card.get_by_role("button", name="Edit Zelda (SNES)").click()
    expect(form.get_by_label("Executable")).to_have_value("/usr/bin/snes9x")
    expect(form.get_by_label("Step 1: undo")).to_have_value(
        "pactl set-sink-volume @DEFAULT_SINK@ 100%"
    )
    form.get_by_label("Title", exact=True).fill("The Legend of Zelda")
    form.get_by_label("Remove step 1").click()
    page.click("#save-entry")
    expect(page.locator("#flash")).to_have_text("Saved The Legend of Zelda.")
    with host.mgmt() as c:
        stored = c.get(f"/api/v1/library/custom/{bare}").json()
    assert stored["title"] == "The Legend of Zelda" and "prep" not in stored

    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete The Legend of Zelda").click()
    expect(page.locator(f".title-card[data-id='custom:{bare}']")).to_have_count(0)
    with host.mgmt() as c:
        assert c.get(f"/api/v1/library/custom/{bare}").status_code == 404


@pytest.fixture
def receiver():
    """A real HTTP receiver that answers 500, on an address the host may post to (the SSRF
    rule refuses loopback)."""
    ip = helpers.receiver_ip()
    if ipaddress.ip_address(ip).is_loopback:
        pytest.skip("no non-loopback IPv4 address here to run a webhook receiver on")
    rec = helpers.start_receiver(ip, statuses=[500])
    yield rec
    rec.close()


def test_hooks_page_shows_field_errors_in_place_test_fires_and_logs_deliveries(
    host, tmp_path, receiver
):
    page = host.page
    (host.state_dir / "hooks.json").write_text('{"hooks": [{"on": "nope.*"}]}')  # a hand edit
    page.goto("/hooks")
    expect(page.locator("#invalid")).to_contain_text("Saving a valid document fixes it")
    expect(page.locator("#no-hooks")).to_be_visible()
    expect(page.locator("#no-deliveries")).to_be_visible()
    out = tmp_path / "fired.json"

    page.click("#add-hook")
    first = page.locator("fieldset.hook").nth(0)
    expect(first.get_by_label("On (event kind or domain.*)")).to_be_focused()
    first.get_by_label("On (event kind or domain.*)").fill("stream.*")
    first.get_by_label("Run (shell command)").fill(f"cat > {out}; exit 3")
    first.get_by_label("Timeout (s, 1 to 600)").fill("0")
    first.get_by_label("Only for client").fill("Living room TV")
    page.click("#add-hook")
    second = page.locator("fieldset.hook").nth(1)
    second.get_by_label("On (event kind or domain.*)").fill("library.changed")
    second.get_by_label("Webhook (http(s) URL)").fill("http://127.0.0.1:9/hook")
    page.click("#save-hooks")

    expect(first.locator(".field-error[data-for='hooks[0].timeout_s']")).to_have_text(
        "must be an integer from 1 to 600"
    )
    expect(second.locator(".field-error[data-for='hooks[1].webhook']")).to_contain_text("loopback")
    expect(page.locator("#flash")).to_contain_text("Nothing saved: 2 fields to fix")
    assert "nope" in (host.state_dir / "hooks.json").read_text()  # nothing written
    expect(page.locator("#invalid")).to_contain_text("every hook is disabled")
    shot(page, "hooks-field-errors")

    first.get_by_label("Timeout (s, 1 to 600)").fill("10")
    second.get_by_label("Webhook (http(s) URL)").fill(receiver.url)
    expect(first.get_by_role("button", name="Test-fire hook 1")).to_be_disabled()  # not saved
    page.click("#save-hooks")
    expect(page.locator("#flash")).to_have_text("Saved 2 hooks.")
    expect(page.locator("#invalid")).to_be_hidden()
    doc = json.loads((host.state_dir / "hooks.json").read_text())
    assert doc["hooks"][0] == {
        "on": "stream.*",
        "run": f"cat > {out}; exit 3",
        "timeout_s": 10,
        "filter": {"client": "Living room TV"},
    }
    assert doc["hooks"][1] == {"on": "library.changed", "webhook": receiver.url}

    # Test-fire through the hook worker: the command's exit code, the webhook's HTTP status.
    page.get_by_role("button", name="Test-fire hook 1").click()
    expect(page.locator("#flash")).to_contain_text("Hook 1 test-fired (stream.started: run)")
    run_row = page.locator("#deliveries tbody tr", has_text="cat >")
    expect(run_row).to_have_count(1, timeout=30_000)
    cells = run_row.locator("td")
    expect(cells.nth(1)).to_have_text("run")
    expect(cells.nth(3)).to_have_text("stream.started test")
    expect(cells.nth(4)).to_have_text("failed")
    expect(cells.nth(5)).to_have_text("3")
    expect(cells.nth(7)).to_have_text(re.compile(r"^\d+ ms$"))
    assert json.loads(out.read_text())["test"] is True

    page.get_by_role("button", name="Test-fire hook 2").click()
    hook_row = page.locator("#deliveries tbody tr", has_text=receiver.url)
    expect(hook_row).to_have_count(1, timeout=30_000)
    expect(hook_row.locator("td").nth(6)).to_have_text("500")
    expect(hook_row.locator("td").nth(8)).to_have_text("HTTP 500")
    got = receiver.get(timeout=5)
    assert json.loads(got.body)["kind"] == "library.changed"
    shot(page, "hooks")
