"""GNOME (mutter) screen capture: the ScreenCast D-Bus session (`screencast`) and its frames
through GStreamer's pipewiresrc (`frames`). docs/desktop-capture.md says what is measured and
what remains."""
