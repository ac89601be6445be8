"""An X11 test app (run through Xwayland as the compositor's user): paints four known colour
quadrants at its window's size and writes what it sees as JSON lines to argv[1].

Standalone on purpose: it runs under the system interpreter with only python-xlib on its path,
since the compositor's user may not read the host's virtualenv."""

import json
import os
import sys

from Xlib import X, Xatom, display

# top-left, top-right, bottom-left, bottom-right, as (R, G, B)
QUADRANTS = [(255, 0, 255), (0, 255, 255), (255, 255, 255), (255, 128, 0)]


def install(lib, owner: tuple[int, int] | None = None):
    """Copy this app and python-xlib into the folder `lib` (a pathlib.Path), readable by every
    user (the host's venv may sit under a 0700 home the compositor's user cannot enter), with a
    `logs` folder anyone may write; `owner` (uid, gid) also gets the whole tree. Returns `lib`.
    Run the app as `/usr/bin/python3 lib/x11_app.py LOG` with PYTHONPATH=lib."""
    import shutil

    import six
    import Xlib

    lib.mkdir(parents=True, exist_ok=True)
    shutil.copytree(os.path.dirname(Xlib.__file__), lib / "Xlib", dirs_exist_ok=True)
    shutil.copy(six.__file__, lib / "six.py")
    shutil.copy(__file__, lib / "x11_app.py")
    (lib / "logs").mkdir(exist_ok=True)
    for root, dirs, files in os.walk(lib):
        for name in ["", *dirs, *files]:
            path = os.path.join(root, name)
            os.chmod(path, 0o755 if os.path.isdir(path) else 0o644)
            if owner:
                os.chown(path, *owner)
    os.chmod(lib / "logs", 0o777)
    return lib


def main() -> None:
    out = open(sys.argv[1], "a", buffering=1)  # noqa: SIM115 - lives as long as the app

    def note(**kw) -> None:
        out.write(json.dumps(kw) + "\n")

    d = display.Display()
    screen = d.screen()
    win = screen.root.create_window(
        0,
        0,
        640,
        480,
        0,
        screen.root_depth,
        X.InputOutput,
        X.CopyFromParent,
        background_pixel=screen.black_pixel,
        event_mask=X.ExposureMask
        | X.StructureNotifyMask
        | X.KeyPressMask
        | X.KeyReleaseMask
        | X.ButtonPressMask
        | X.ButtonReleaseMask
        | X.PointerMotionMask,
    )
    win.set_wm_name("x11-test-app")
    win.set_wm_class("x11-test-app", "X11TestApp")
    win.change_property(d.intern_atom("_NET_WM_PID"), Xatom.CARDINAL, 32, [os.getpid()])
    gcs = [win.create_gc(foreground=r << 16 | g << 8 | b) for r, g, b in QUADRANTS]
    size = [640, 480]

    def paint() -> None:
        w, h = size
        for i, gc in enumerate(gcs):
            x = 0 if i % 2 == 0 else w // 2
            y = 0 if i < 2 else h // 2
            win.fill_rectangle(gc, x, y, w - w // 2 if x else w // 2, h - h // 2 if y else h // 2)
        d.flush()
        note(kind="painted", width=w, height=h)

    win.map()
    d.flush()
    note(kind="started", display=os.environ.get("DISPLAY"))
    while True:
        ev = d.next_event()
        if ev.type == X.ConfigureNotify:
            size[:] = [ev.width, ev.height]
            note(kind="configure", width=ev.width, height=ev.height)
            paint()
        elif ev.type == X.Expose and ev.count == 0:
            paint()
        elif ev.type == X.MapNotify:
            note(kind="mapped")
        elif ev.type in (X.KeyPress, X.KeyRelease):
            note(kind="key", down=ev.type == X.KeyPress, keycode=ev.detail, state=ev.state)
        elif ev.type in (X.ButtonPress, X.ButtonRelease):
            note(
                kind="button",
                down=ev.type == X.ButtonPress,
                button=ev.detail,
                x=ev.event_x,
                y=ev.event_y,
            )
        elif ev.type == X.MotionNotify:
            note(kind="motion", x=ev.event_x, y=ev.event_y)


if __name__ == "__main__":
    main()
