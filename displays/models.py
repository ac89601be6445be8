"""Display state kept in the database. The tables keep their `streaming_` names: the models
moved app without a database change (migrations 0001 of `displays`)."""

from django.db import models


class VirtualDisplay(models.Model):
    """A virtual display the host keeps: active (in use), lingering (counting down) or pinned.

    The row outlives the process that started its X server, so a countdown survives a host
    restart; teardown deletes the row after the server is gone.
    """

    ACTIVE, LINGERING, PINNED = "active", "lingering", "pinned"
    STATES = [(ACTIVE, "active"), (LINGERING, "lingering"), (PINNED, "pinned")]

    slot = models.PositiveIntegerField(unique=True)
    backend = models.CharField(max_length=32, default="xvfb")
    # False for a display the host attached to (the operator's X server): never started,
    # kept or torn down by the host.
    owned = models.BooleanField(default=True)
    width = models.PositiveIntegerField()
    height = models.PositiveIntegerField()
    refresh = models.PositiveIntegerField()
    state = models.CharField(max_length=16, choices=STATES, default=ACTIVE, db_index=True)
    sessions = models.PositiveIntegerField(default=0)
    client = models.CharField(max_length=128, blank=True, default="")
    identity_key = models.CharField(max_length=256, db_index=True)
    identity_slot = models.PositiveIntegerField(null=True, blank=True)
    group = models.PositiveIntegerField(default=0)
    display_index = models.PositiveIntegerField(default=0)
    x = models.IntegerField(default=0)
    y = models.IntegerField(default=0)
    topology = models.CharField(max_length=16, default="exclusive")
    # The policy axes in force when the display was opened: later policy edits never reach it.
    policy = models.JSONField(default=dict)
    # The operator pinned this display while it was active: it is pinned, whatever its
    # policy says, when its last session leaves (POST /display/pin; /unpin clears it).
    pin_on_leave = models.BooleanField(default=False)
    deadline = models.DateTimeField(null=True, blank=True, db_index=True)
    pid = models.PositiveIntegerField(null=True, blank=True)
    x_display = models.CharField(max_length=16, blank=True, default="")
    # wlroots backends: the compositor's output (sway: one per display; wlr: the operator's)
    # and the compositor's Wayland socket (absolute path).
    output = models.CharField(max_length=64, blank=True, default="")
    wayland = models.CharField(max_length=255, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "streaming_virtualdisplay"
        ordering = ["group", "display_index", "slot"]

    def __str__(self) -> str:
        return f"slot {self.slot} · {self.mode} · {self.state}"

    @property
    def mode(self) -> str:
        return f"{self.width}x{self.height}@{self.refresh}"


class CustomPreset(models.Model):
    """A saved display-behaviour bundle; applying it is a PUT of a custom policy."""

    id = models.CharField(primary_key=True, max_length=12, editable=False)
    name = models.CharField(max_length=128)
    fields = models.JSONField(default=dict)
    game_session = models.CharField(max_length=16, default="auto")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "streaming_custompreset"
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return self.name

    def as_record(self) -> dict:
        return {
            "id": self.id,
            "name": self.name,
            "fields": {**self.fields, "game_session": self.game_session},
            "game_session": self.game_session,
        }
