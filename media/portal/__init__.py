"""Screen capture through xdg-desktop-portal's ScreenCast interface (`screencast`), for desktops
whose own capture interfaces the host cannot use; the frames come through the same
pipewiresrc reader as GNOME's (media/mutter/frames.py), on the PipeWire remote the portal
hands over. docs/portal-capture.md says what is measured and what remains."""
