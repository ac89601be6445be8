"""The requests and events this client speaks, by interface: (name, signature) in opcode order.

Written from the public protocol descriptions (wayland.xml; xdg-shell; xdg-output-unstable-v1;
wlr-screencopy-unstable-v1; wlr-virtual-pointer-unstable-v1; virtual-keyboard-unstable-v1;
KDE's zkde-screencast-unstable-v1 and fake-input from plasma-wayland-protocols).
Only the messages up to the last one used are needed for opcodes to line up, but events are
listed in full where a compositor may send them, so an unknown event is never mis-decoded.
"""

from __future__ import annotations

# interface -> (requests, events); each a list of (name, signature)
INTERFACES: dict[str, tuple[list[tuple[str, str]], list[tuple[str, str]]]] = {
    "wl_display": (
        [("sync", "n"), ("get_registry", "n")],
        [("error", "ous"), ("delete_id", "u")],
    ),
    "wl_registry": (
        [("bind", "usun")],  # name, then the untyped new_id: interface, version, id
        [("global", "usu"), ("global_remove", "u")],
    ),
    "wl_callback": ([], [("done", "u")]),
    "wl_compositor": ([("create_surface", "n"), ("create_region", "n")], []),
    "wl_shm_pool": (
        [("create_buffer", "niiiiu"), ("destroy", ""), ("resize", "i")],
        [],
    ),
    "wl_shm": ([("create_pool", "nhi"), ("release", "")], [("format", "u")]),
    "wl_buffer": ([("destroy", "")], [("release", "")]),
    "wl_surface": (
        [
            ("destroy", ""),
            ("attach", "?oii"),
            ("damage", "iiii"),
            ("frame", "n"),
            ("set_opaque_region", "?o"),
            ("set_input_region", "?o"),
            ("commit", ""),
            ("set_buffer_transform", "i"),
            ("set_buffer_scale", "i"),
            ("damage_buffer", "iiii"),
        ],
        [
            ("enter", "o"),
            ("leave", "o"),
            ("preferred_buffer_scale", "i"),
            ("preferred_buffer_transform", "u"),
        ],
    ),
    "wl_seat": (
        [("get_pointer", "n"), ("get_keyboard", "n"), ("get_touch", "n"), ("release", "")],
        [("capabilities", "u"), ("name", "s")],
    ),
    "wl_pointer": (
        [("set_cursor", "u?oii"), ("release", "")],
        [
            ("enter", "uoff"),
            ("leave", "uo"),
            ("motion", "uff"),
            ("button", "uuuu"),
            ("axis", "uuf"),
            ("frame", ""),
            ("axis_source", "u"),
            ("axis_stop", "uu"),
            ("axis_discrete", "ui"),
            ("axis_value120", "ui"),
            ("axis_relative_direction", "uu"),
        ],
    ),
    "wl_keyboard": (
        [("release", "")],
        [
            ("keymap", "uhu"),
            ("enter", "uoa"),
            ("leave", "uo"),
            ("key", "uuuu"),
            ("modifiers", "uuuuu"),
            ("repeat_info", "ii"),
        ],
    ),
    "wl_output": (
        [("release", "")],
        [
            ("geometry", "iiiiissi"),
            ("mode", "uiii"),
            ("done", ""),
            ("scale", "i"),
            ("name", "s"),
            ("description", "s"),
        ],
    ),
    "zxdg_output_manager_v1": ([("destroy", ""), ("get_xdg_output", "no")], []),
    "zxdg_output_v1": (
        [("destroy", "")],
        [
            ("logical_position", "ii"),
            ("logical_size", "ii"),
            ("done", ""),
            ("name", "s"),
            ("description", "s"),
        ],
    ),
    "xdg_wm_base": (
        [
            ("destroy", ""),
            ("create_positioner", "n"),
            ("get_xdg_surface", "no"),
            ("pong", "u"),
        ],
        [("ping", "u")],
    ),
    "xdg_surface": (
        [
            ("destroy", ""),
            ("get_toplevel", "n"),
            ("get_popup", "n?oo"),
            ("set_window_geometry", "iiii"),
            ("ack_configure", "u"),
        ],
        [("configure", "u")],
    ),
    "xdg_toplevel": (
        [
            ("destroy", ""),
            ("set_parent", "?o"),
            ("set_title", "s"),
            ("set_app_id", "s"),
            ("show_window_menu", "ouii"),
            ("move", "ou"),
            ("resize", "ouu"),
            ("set_max_size", "ii"),
            ("set_min_size", "ii"),
            ("set_maximized", ""),
            ("unset_maximized", ""),
            ("set_fullscreen", "?o"),
            ("unset_fullscreen", ""),
            ("set_minimized", ""),
        ],
        [("configure", "iia"), ("close", ""), ("configure_bounds", "ii"), ("caps", "a")],
    ),
    "zwlr_screencopy_manager_v1": (
        [("capture_output", "nio"), ("capture_output_region", "nioiiii"), ("destroy", "")],
        [],
    ),
    "zwlr_screencopy_frame_v1": (
        [("copy", "o"), ("destroy", ""), ("copy_with_damage", "o")],
        [
            ("buffer", "uuuu"),
            ("flags", "u"),
            ("ready", "uuu"),
            ("failed", ""),
            ("damage", "uuuu"),
            ("linux_dmabuf", "uuu"),
            ("buffer_done", ""),
        ],
    ),
    "zwp_virtual_keyboard_manager_v1": ([("create_virtual_keyboard", "on")], []),
    "zwp_virtual_keyboard_v1": (
        [("keymap", "uhu"), ("key", "uuu"), ("modifiers", "uuuu"), ("destroy", "")],
        [],
    ),
    "zwlr_virtual_pointer_manager_v1": (
        [
            ("create_virtual_pointer", "?on"),
            ("destroy", ""),
            ("create_virtual_pointer_with_output", "?o?on"),
        ],
        [],
    ),
    "zwlr_virtual_pointer_v1": (
        [
            ("motion", "uff"),
            ("motion_absolute", "uuuuu"),
            ("button", "uuu"),
            ("axis", "uuf"),
            ("frame", ""),
            ("axis_source", "u"),
            ("axis_stop", "uu"),
            ("axis_discrete", "uufi"),
            ("destroy", ""),
        ],
        [],
    ),
    # KDE: restricted to privileged clients (docs/kde-capture.md says how one is let in)
    "zkde_screencast_unstable_v1": (
        [
            ("stream_output", "nou"),
            ("stream_window", "nsu"),
            ("destroy", ""),
            ("stream_virtual_output", "nsiifu"),  # since 2
            ("stream_region", "niiuufu"),  # since 3
            ("stream_virtual_output_with_description", "nssiifu"),  # since 4
        ],
        [],
    ),
    "zkde_screencast_stream_unstable_v1": (
        [("close", "")],
        [("closed", ""), ("created", "u"), ("failed", "s")],
    ),
    "org_kde_plasma_window_management": (
        [("show_desktop", "u"), ("get_window", "nu"), ("get_window_by_uuid", "ns")],
        [
            ("show_desktop_changed", "u"),
            ("window", "u"),
            ("stacking_order_changed", "a"),
            ("stacking_order_uuid_changed", "s"),  # since 12, on bind: the windows' uuids
            ("window_with_uuid", "us"),  # since 13
            ("stacking_order_changed_2", ""),  # since 17
        ],
    ),
    "org_kde_kwin_fake_input": (
        [
            ("authenticate", "ss"),
            ("pointer_motion", "ff"),
            ("button", "uu"),
            ("axis", "uf"),
            ("touch_down", "uff"),  # since 2
            ("touch_motion", "uff"),
            ("touch_up", "u"),
            ("touch_cancel", ""),
            ("touch_frame", ""),
            ("pointer_motion_absolute", "ff"),  # since 3
            ("keyboard_key", "uu"),  # since 4
        ],
        [],
    ),
}

# wl_shm formats (the DRM fourcc, except the two legacy values 0 and 1)
SHM_ARGB8888 = 0
SHM_XRGB8888 = 1
SHM_ABGR8888 = 0x34324241
SHM_XBGR8888 = 0x34324258

# zwlr_screencopy_frame_v1 flags
SCREENCOPY_Y_INVERT = 1

# zkde_screencast_unstable_v1 pointer modes
KDE_POINTER_HIDDEN, KDE_POINTER_EMBEDDED, KDE_POINTER_METADATA = 1, 2, 4
