"""A session's sound, for both planes: its own PulseAudio null sink (the launched app's default
sink, through `app_env()`) captured by parec, with the `host_audio_*` chain and the
`host_opus_*` settings, all from `media.audio` (docs/playable.md), read once at session start.

Each plane only wraps what this opens in its transport: compat's engine sends the
`SessionSound` as Opus over RTP; the native plane's `native.sound.OpusTrack` hands the same
capture, chain and settings to aiortc. No sound server, or `stream_audio = false`: None, and
the client gets silence; a session never fails for sound, with one exception: a compat
launch that asked for 5.1 or 7.1 from a sound server that runs but will not make that sink is
refused with the server's reason (`SoundRefused`), rather than streaming a layout the client
did not ask for.
"""

from __future__ import annotations

import logging
import subprocess

from hostconfig import store

log = logging.getLogger("streaming.sessions")


class SoundRefused(Exception):
    """The sound server runs but refused the session's surround sink: the launch is refused."""


def values() -> dict:
    return store.values()


def open_capture(name: str, config: dict, channels: int = 2):
    """The session's started `SessionAudio` (its sink named for `name`, with `channels`:
    2, 6 or 8), or None: audio off, or no sound server (logged). SoundRefused: a server that
    would not make a surround sink."""
    # heavy: numpy; only a session process opens sound (the web process imports this module)
    from media.audio.capture import SessionAudio, SinkRefused

    try:
        audio = SessionAudio.from_config(config, name, channels=channels)
    except Exception as exc:  # a session never fails for sound
        log.warning("session %s streams without sound: %s", name, exc)
        return None
    if audio is None:
        log.info("session %s: stream_audio is off; the client gets silence", name)
        return None
    try:
        audio.start()
    except SinkRefused as exc:
        log.warning("session %s: %s", name, exc)
        raise SoundRefused(str(exc)) from None
    except Exception as exc:  # no sound server: AudioUnavailable, OSError, a pactl failure
        log.warning("session %s streams without sound: %s", name, exc)
        return None
    return audio


def open_sound(name: str, channels: int = 2):
    """The session's `media.audiofeed.SessionSound` (capture, chain, Opus settings), or None;
    its sink has `channels` (the launch's layout)."""
    # heavy, for a session process only (the web process imports this module):
    from media.audio.chain import Chain  # heavy: numpy
    from media.audio.opus import OpusSettings  # heavy: av
    from media.audiofeed import SessionSound  # heavy: av

    config = values()
    audio = open_capture(name, config, channels)
    if audio is None:
        return None
    return SessionSound(audio, Chain.from_config(config), OpusSettings.from_config(config))


def record_fields(audio) -> dict:
    """The session record's sound: its sink (`audio_sink`) and what `leftovers` names."""
    return {"audio_sink": audio.sink_name if audio is not None else None, **leftovers(audio)}


def leftovers(audio) -> dict:
    """What a session's sound (`media.audio.capture.SessionAudio`) leaves if its process is
    killed before its own cleanup, for the record (`recover_lost` undoes it): the PulseAudio
    it started for itself (`owned_pids`), or, on a sound server it did not start (a desktop's
    own), its null sink's module (`sound_sink`), which would stay loaded there."""
    server = getattr(audio, "server", None)
    proc = getattr(server, "proc", None)
    if proc is not None:
        return {"owned_pids": [proc.pid]}
    sink = getattr(audio, "sink", None)
    if sink is None or getattr(sink, "module", None) is None:
        return {"owned_pids": []}
    # A server it did not start is the one its environment names: so is the recovery's.
    return {"owned_pids": [], "sound_sink": {"name": sink.name, "module": str(sink.module)}}


def unload_sink(spec: dict | None) -> bool:
    """Unload a dead session's null sink from the sound server it was loaded into, when that
    module is still the session's (module numbers are per server run: a restarted server may
    have given it to another module). Returns whether it was unloaded."""
    if not spec or not str(spec.get("module", "")).isdigit():
        return False

    def pactl(*args: str) -> str:
        return subprocess.run(["pactl", *args], capture_output=True, text=True, timeout=5,
                              check=True).stdout  # fmt: skip

    module, mark = spec["module"], f"sink_name={spec.get('name')}"
    for line in pactl("list", "short", "modules").splitlines():
        index, _, rest = line.partition("\t")
        if index == module and "module-null-sink" in rest and mark in rest.split():
            pactl("unload-module", module)
            return True
    return False
