"""Art route: Steam's own cache, the user's grid, our cache, then the (stand-in) CDN."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from library import art
from tests.library import stores

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.library.urls")]


def _decode(data: bytes):
    img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    assert img is not None
    return img


def test_local_librarycache_png_is_served_as_jpeg(fixture_stores, state, mgmt):
    cache = fixture_stores.steam / "appcache" / "librarycache" / "570" / "abc123"
    cache.mkdir(parents=True)
    (cache / "logo.png").write_bytes(stores.png_bytes(color=(0, 0, 255)))
    r = mgmt.get("/api/v1/library/art/steam:570/logo")
    assert r.status_code == 200 and r["Content-Type"] == "image/jpeg"
    assert r.content.startswith(b"\xff\xd8\xff")
    b, g, red = _decode(r.content)[10, 10]
    assert red > 200 and b < 50


def test_user_grid_art_is_found(fixture_stores, state, mgmt):
    grid = fixture_stores.steam / "userdata" / "1234" / "config" / "grid"
    grid.mkdir(parents=True)
    (grid / "292030p.jpg").write_bytes(stores.jpeg_bytes())
    r = mgmt.get("/api/v1/library/art/steam:292030/portrait")
    assert r.status_code == 200 and r.content == stores.jpeg_bytes()


def test_cdn_fetch_is_cached_and_misses_are_remembered(
    fixture_stores, state, mgmt, cdn, eager_celery, monkeypatch
):
    monkeypatch.setenv("HOST_ART_CDN_URL", cdn.url)
    cdn.files["/steam/apps/1091500/library_hero.jpg"] = stores.jpeg_bytes(color=(0, 255, 0))
    cdn.files["/steam/apps/1091500/logo.png"] = stores.png_bytes()
    r = mgmt.get("/api/v1/library/art/steam:1091500/hero")
    assert r.status_code == 200 and r["Content-Type"] == "image/jpeg"
    assert (state / "art/steam/1091500/hero.jpg").read_bytes() == r.content
    logo = mgmt.get("/api/v1/library/art/steam:1091500/logo")
    assert logo.status_code == 200 and logo.content.startswith(b"\xff\xd8\xff")
    hits = len(cdn.hits)
    assert mgmt.get("/api/v1/library/art/steam:1091500/hero").status_code == 200
    assert len(cdn.hits) == hits  # served from our cache
    assert mgmt.get("/api/v1/library/art/steam:1091500/portrait").status_code == 404
    assert mgmt.get("/api/v1/library/art/steam:1091500/portrait").status_code == 404
    assert cdn.hits.count("/steam/apps/1091500/library_600x900.jpg") == 1


def test_cdn_non_image_and_redirect_are_misses(
    fixture_stores, state, cdn, eager_celery, monkeypatch
):
    monkeypatch.setenv("HOST_ART_CDN_URL", cdn.url + "/redirect")
    assert art.fetch_from_cdn(570, "header") is False
    monkeypatch.setenv("HOST_ART_CDN_URL", cdn.url)
    cdn.files["/steam/apps/570/header.jpg"] = stores.zip_named_png()
    assert art.fetch_from_cdn(570, "header") is False
    assert not (state / "art/steam/570/header.jpg").exists()


@pytest.mark.parametrize(
    "entry_id,kind",
    [
        ("steam:570", "banner"),
        ("heroic:legendary:Fortnite", "portrait"),
        ("lutris:1", "portrait"),
        ("custom:0123456789ab", "portrait"),
        ("steam:..", "portrait"),
        ("steam:570%00", "portrait"),
        ("steam:99999999999", "portrait"),
        ("nostore:1", "hero"),
        ("steam:570", ".."),
    ],
)
def test_other_stores_kinds_and_hostile_ids_are_404(fixture_stores, state, mgmt, entry_id, kind):
    r = mgmt.get(f"/api/v1/library/art/{entry_id}/{kind}")
    assert r.status_code == 404
    assert not (state / "art").exists() or not any((state / "art").rglob("*.jpg"))


def test_shortcut_ids_never_reach_the_cdn(fixture_stores, state, cdn, eager_celery, monkeypatch):
    monkeypatch.setenv("HOST_ART_CDN_URL", cdn.url)
    with pytest.raises(art.NoArt):
        art.get_jpeg(f"steam:{0x80000001}", "portrait")
    assert cdn.hits == []


def test_the_app_hands_art_its_celery_fetch_task():
    from library import tasks

    assert art._fetch_queue == tasks.fetch_art.delay  # LibraryConfig.ready; art imports no task


def test_a_miss_is_queued_once_and_fetched_inline_without_a_queue(
    fixture_stores, state, cdn, monkeypatch
):
    monkeypatch.setenv("HOST_ART_CDN_URL", cdn.url)
    cdn.files["/steam/apps/620/header.jpg"] = stores.jpeg_bytes()
    queued = []
    monkeypatch.setattr(art, "_fetch_queue", lambda appid, kind: queued.append((appid, kind)))
    for _ in range(2):
        with pytest.raises(art.NoArt):
            art.get_jpeg("steam:620", "header", wait=False)
    assert queued == [(620, "header")] and cdn.hits == []  # the pending marker holds the second

    def no_broker(appid, kind):
        raise ConnectionError("no broker")

    cdn.files["/steam/apps/620/library_hero.jpg"] = stores.jpeg_bytes(color=(0, 255, 0))
    cdn.files["/steam/apps/620/library_600x900.jpg"] = stores.jpeg_bytes(color=(255, 0, 0))
    for queue, kind, name in (
        (no_broker, "hero", "library_hero"),
        (None, "portrait", "library_600x900"),
    ):
        monkeypatch.setattr(art, "_fetch_queue", queue)
        assert art.get_jpeg("steam:620", kind).startswith(b"\xff\xd8\xff")  # fetched inline
        assert cdn.hits.count(f"/steam/apps/620/{name}.jpg") == 1
