"""KDE Plasma (KWin) screen capture and input over KWin's own Wayland protocols: a PipeWire
stream from zkde_screencast_unstable_v1 (`screencast`, frames through
media/mutter/frames.py's pipewiresrc reader) and org_kde_kwin_fake_input (`input`).
docs/kde-capture.md says what is measured, how KWin lets a client in, and what remains."""
