"""Streaming state kept in the database."""

from django.db import models


class SessionRecord(models.Model):
    """One stream (client connected -> client gone), written when the client goes (kept
    without any webhook). A session that is resumed leaves one record per stream, all with
    its `session_id`; a session that never streamed leaves none.

    Field names are the admin API's session record (and stream webhook body).
    """

    t_start = models.DateTimeField(db_index=True)
    t_end = models.DateTimeField(null=True, blank=True)
    # The live session this stream belonged to (registry id, 8 hex digits; "" on rows written
    # before sessions had ids).
    session_id = models.CharField(max_length=16, blank=True, default="", db_index=True)
    plane = models.CharField(max_length=16, default="compat")
    app_name = models.CharField(max_length=256, blank=True, default="", db_index=True)
    client_name = models.CharField(max_length=256, blank=True, default="", db_index=True)
    client_fingerprint = models.CharField(max_length=64, blank=True, default="")
    client_address = models.CharField(max_length=64, blank=True, default="")
    codec = models.CharField(max_length=16, blank=True, default="")
    # The FFmpeg encoder that opened (libx264, hevc_nvenc, ...; the last one after a hand-over).
    # Kept in the database and the console; the spec's record shape (`as_record`) has no field.
    encoder = models.CharField(max_length=32, blank=True, default="")
    width = models.PositiveIntegerField(default=0)
    height = models.PositiveIntegerField(default=0)
    fps = models.PositiveIntegerField(default=0)
    avg_bitrate_kbps = models.FloatField(default=0)
    avg_rtt_ms = models.FloatField(default=0)
    avg_encode_ms = models.FloatField(default=0)
    dropped_frames = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True, default="")
    # Per-second samples (bitrate, RTT, encode ms) for the console's chart of this session.
    samples = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-t_start", "-id"]

    def __str__(self) -> str:
        return f"{self.app_name or 'session'} · {self.client_name} · {self.t_start:%Y-%m-%d %H:%M}"

    def as_record(self) -> dict:
        """The spec's session record (the webhook body without `event`)."""
        return {
            "t_start": int(self.t_start.timestamp()),
            "t_end": int(self.t_end.timestamp()) if self.t_end else None,
            "session_id": self.session_id,
            "app_name": self.app_name,
            "client_name": self.client_name,
            "client_address": self.client_address,
            "codec": self.codec,
            "width": self.width,
            "height": self.height,
            "fps": self.fps,
            "avg_bitrate_kbps": self.avg_bitrate_kbps,
            "avg_rtt_ms": self.avg_rtt_ms,
            "avg_encode_ms": self.avg_encode_ms,
            "dropped_frames": self.dropped_frames,
            "error": self.error,
        }
