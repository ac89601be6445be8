"""The display models moved from `streaming` to `displays` without a database
change: a row written at the old state is read through the new model, and its content type
follows."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor


@pytest.mark.django_db(transaction=True)
def test_display_rows_survive_the_move_between_apps():
    executor = MigrationExecutor(connection)
    moved = executor.loader.get_migration("displays", "0001_initial")
    before = [d for d in moved.dependencies if d[0] == "streaming"]
    executor.migrate(before + [("displays", None)])
    old = executor.loader.project_state(
        before + [("contenttypes", "0002_remove_content_type_name")]
    ).apps
    old.get_model("streaming", "VirtualDisplay").objects.create(
        slot=7,
        width=1280,
        height=720,
        refresh=60,
        state="pinned",
        client="old-host",
        identity_key="k",
        x_display=":7",
    )
    old.get_model("contenttypes", "ContentType").objects.get_or_create(
        app_label="streaming", model="virtualdisplay"
    )
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    from django.contrib.contenttypes.models import ContentType

    from displays.models import VirtualDisplay

    ContentType.objects.clear_cache()
    row = VirtualDisplay.objects.get(slot=7)
    assert (row.client, row.state, row.mode) == ("old-host", "pinned", "1280x720@60")
    assert VirtualDisplay._meta.db_table == "streaming_virtualdisplay"
    assert ContentType.objects.filter(app_label="displays", model="virtualdisplay").exists()
    assert not ContentType.objects.filter(app_label="streaming", model="virtualdisplay").exists()
    VirtualDisplay.objects.filter(slot=7).delete()
