"""A small Wayland client: one connection, its objects, the registry, outputs and shm pools.

Not thread-safe: each user (the capture thread, the input thread) opens its own `Display`.
Events are dispatched only inside `dispatch()` / `roundtrip()`, to the handlers set on each
`Proxy`; a `wl_display.error` becomes `WaylandProtocolError` raised from there, so a
compositor that refuses a request is a Python exception, never a silent hang.
"""

from __future__ import annotations

import mmap
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from media.wayland.protocols import INTERFACES
from media.wayland.wire import Connection, WireError, decode_args, encode


class WaylandError(Exception):
    """Base of everything this package raises."""


class WaylandConnectError(WaylandError):
    """No compositor answers at the socket."""


class WaylandProtocolError(WaylandError):
    """The compositor sent wl_display.error (the connection is dead after it)."""

    def __init__(self, interface: str, object_id: int, code: int, message: str):
        super().__init__(
            f"Wayland protocol error on {interface}@{object_id} (code {code}): {message}"
        )
        self.interface, self.object_id, self.code, self.message = (
            interface,
            object_id,
            code,
            message,
        )


class MissingGlobal(WaylandError):
    """The compositor does not offer an interface this feature needs."""


class NoSuchOutput(WaylandError):
    """No output of that name."""


def socket_path(display: str | None = None, runtime_dir: str | None = None) -> str:
    """The socket a client connects to: an absolute `display` as is, else it (or
    $WAYLAND_DISPLAY, else wayland-0) under `runtime_dir` or $XDG_RUNTIME_DIR."""
    name = display or os.environ.get("WAYLAND_DISPLAY") or "wayland-0"
    if os.path.isabs(name):
        return name
    base = runtime_dir or os.environ.get("XDG_RUNTIME_DIR")
    if not base:
        raise WaylandConnectError(f"XDG_RUNTIME_DIR is not set, so {name!r} cannot be found")
    return os.path.join(base, name)


class Proxy:
    """One object on the connection. `on(event, fn)` sets the handler of an event."""

    def __init__(self, display: Display, object_id: int, interface: str, version: int):
        self.display, self.id, self.interface, self.version = display, object_id, interface, version
        self.handlers: dict[str, Callable] = {}
        self.alive = True

    def on(self, event: str, fn: Callable) -> Proxy:
        self.handlers[event] = fn
        return self

    def request(self, name: str, *args, interface: str | None = None, version: int | None = None):
        """Send a request; for a request that creates an object, returns its Proxy (its
        interface is `interface`, or the request's own for wl_registry.bind)."""
        return self.display._request(self, name, args, interface, version)

    def __repr__(self) -> str:
        return f"<{self.interface}@{self.id}>"


@dataclass
class Global:
    name: int
    interface: str
    version: int


@dataclass
class OutputInfo:
    """What the compositor says about one output (pixels in the output's current mode)."""

    proxy: Proxy
    global_name: int
    name: str | None = None
    description: str | None = None
    width: int = 0
    height: int = 0
    refresh_mhz: int = 0
    x: int = 0
    y: int = 0
    extra: dict = field(default_factory=dict)


class Display:
    """A connection to a compositor. `Display(path)`; `.close()` (or `with`)."""

    def __init__(
        self, display: str | None = None, *, runtime_dir: str | None = None, timeout: float = 10.0
    ):
        self.path = socket_path(display, runtime_dir)
        self.timeout = timeout
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            sock.settimeout(timeout)
            sock.connect(self.path)
        except OSError as e:
            sock.close()
            raise WaylandConnectError(f"no Wayland compositor at {self.path}: {e}") from e
        self.conn = Connection(sock)
        self.objects: dict[int, Proxy] = {}
        self._next_id = 2
        self._free_ids: list[int] = []
        self.error: WaylandProtocolError | None = None
        self.closed = False
        self.wl_display = Proxy(self, 1, "wl_display", 1)
        self.objects[1] = self.wl_display
        self.wl_display.on("error", self._on_error).on("delete_id", self._on_delete_id)
        self.globals: dict[int, Global] = {}
        self.registry = self.wl_display.request("get_registry", interface="wl_registry")
        self.registry.on("global", self._on_global).on("global_remove", self._on_global_remove)
        self.roundtrip()

    # -- objects ------------------------------------------------------------------------------
    def _new_id(self) -> int:
        if self._free_ids:
            return self._free_ids.pop()
        self._next_id += 1
        return self._next_id - 1

    def _request(self, proxy: Proxy, name: str, args: tuple, interface, version):
        self._check()
        requests = INTERFACES[proxy.interface][0]
        found = [(op, sig) for op, (rname, sig) in enumerate(requests) if rname == name]
        if not found:
            raise WireError(f"{proxy.interface} has no request {name!r}")
        opcode, signature = found[0]
        created = None
        out = []
        for arg in args:
            out.append(arg.id if isinstance(arg, Proxy) else arg)
        if "n" in signature:
            if proxy.interface == "wl_registry" and name == "bind":
                gname, iface, ver = args[0], args[1], args[2]
                created = Proxy(self, self._new_id(), iface, ver)
                out = [gname, iface, ver, created.id]
            else:
                iface = interface or _creates(proxy.interface, name)
                created = Proxy(self, self._new_id(), iface, version or proxy.version)
                idx = signature.replace("?", "").index("n")
                out.insert(idx, created.id)
            self.objects[created.id] = created
        data, fds = encode(proxy.id, opcode, signature, out)
        self.conn.queue(data, fds)
        if name in ("destroy", "release") and "n" not in signature:
            proxy.alive = False  # its id comes back through wl_display.delete_id
        return created

    def _on_delete_id(self, object_id: int) -> None:
        self.objects.pop(object_id, None)
        if object_id >= 2:
            self._free_ids.append(object_id)

    def _on_error(self, object_id: int, code: int, message: str) -> None:
        obj = self.objects.get(object_id)
        iface = obj.interface if obj else "unknown"
        self.error = WaylandProtocolError(iface, object_id, code, message or "")

    def _on_global(self, name: int, interface: str, version: int) -> None:
        self.globals[name] = Global(name, interface, version)

    def _on_global_remove(self, name: int) -> None:
        self.globals.pop(name, None)

    def _check(self) -> None:
        if self.error is not None:
            raise self.error
        if self.closed:
            raise WaylandError("the Wayland connection is closed")

    # -- event loop -----------------------------------------------------------------------------
    def flush(self) -> None:
        self._check()
        try:
            self.conn.flush()
        except OSError as e:
            self.closed = True
            raise WaylandConnectError(f"the compositor at {self.path} went away: {e}") from e

    def dispatch(self, timeout: float | None = 0.0) -> int:
        """Flush, wait up to `timeout` for events (0: only what is there), run their handlers;
        how many ran. Raises WaylandProtocolError after a wl_display.error."""
        self.flush()
        try:
            got = self.conn.fill(timeout)
        except (ConnectionError, OSError) as e:
            self.closed = True
            raise WaylandConnectError(f"the compositor at {self.path} went away: {e}") from e
        n = 0
        if got:
            n = self._run_pending()
            try:  # drain what else arrived, without waiting
                while self.conn.fill(0):
                    n += self._run_pending()
            except (ConnectionError, OSError):
                self.closed = True
        self._check()
        return n

    def _run_pending(self) -> int:
        n = 0
        while (msg := self.conn.next_message()) is not None:
            object_id, opcode, body = msg
            obj = self.objects.get(object_id)
            if obj is None:
                continue  # an event for an object we destroyed: harmless
            events = INTERFACES[obj.interface][1]
            if opcode >= len(events):
                raise WireError(f"{obj.interface} sent unknown event {opcode}")
            ename, signature = events[opcode]
            args = decode_args(signature, body, self.conn.in_fds)
            # a destroyed object stays known until delete_id, so its late events still decode
            # (and their fds are taken and closed) but reach no handler
            handler = obj.handlers.get(ename) if obj.alive else None
            if handler is not None:
                handler(*args)
            elif "h" in signature:  # an fd nobody wanted: do not leak it
                for letter, arg in zip(signature.replace("?", ""), args, strict=True):
                    if letter == "h":
                        os.close(arg)
            n += 1
        return n

    def wait_for(
        self, predicate: Callable[[], bool], timeout: float | None = None, what=""
    ) -> None:
        """Dispatch until `predicate()`; WaylandError after `timeout` seconds."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while not predicate():
            left = deadline - time.monotonic()
            if left <= 0:
                raise WaylandError(f"timed out waiting for {what or 'the compositor'}")
            self.dispatch(left)

    def roundtrip(self, timeout: float | None = None) -> None:
        """Send wl_display.sync and dispatch until its callback: every request sent before
        has been handled (or an error raised)."""
        done = []
        cb = self.wl_display.request("sync", interface="wl_callback")
        cb.on("done", lambda _serial: done.append(True))
        self.wait_for(lambda: bool(done), timeout, "wl_display.sync")

    # -- globals ------------------------------------------------------------------------------
    def find_global(self, interface: str) -> Global | None:
        for g in self.globals.values():
            if g.interface == interface:
                return g
        return None

    def bind(self, interface: str, max_version: int, min_version: int = 1) -> Proxy:
        """Bind the first global of `interface` at min(offered, max_version);
        MissingGlobal when it is not offered (or too old)."""
        g = self.find_global(interface)
        if g is None:
            raise MissingGlobal(f"the compositor at {self.path} does not offer {interface}")
        if g.version < min_version:
            raise MissingGlobal(
                f"the compositor offers {interface} version {g.version}, need {min_version}"
            )
        return self.registry.request("bind", g.name, interface, min(g.version, max_version))

    def outputs(self) -> list[OutputInfo]:
        """Every output with its name, current mode and position (wl_output v4's name, or
        xdg-output's name where wl_output is older; xdg-output's logical position where the
        compositor has it, since wl_output's geometry position is 0 on some, sway among them)."""
        infos = []
        for g in [g for g in self.globals.values() if g.interface == "wl_output"]:
            proxy = self.registry.request("bind", g.name, "wl_output", min(g.version, 4))
            info = OutputInfo(proxy, g.name)
            _watch_output(info)
            infos.append(info)
        self.roundtrip()
        if infos and self.find_global("zxdg_output_manager_v1"):
            mgr = self.bind("zxdg_output_manager_v1", 3, 2)
            xdg = []
            for info in infos:
                xo = mgr.request("get_xdg_output", info.proxy)
                xo.on("name", lambda n, info=info: setattr(info, "name", info.name or n))
                xo.on("logical_position", lambda x, y, info=info: _set_pos(info, x, y))
                xo.on("logical_size", lambda w, h, info=info: info.extra.update(logical=(w, h)))
                xdg.append(xo)
            self.roundtrip()
            for xo in xdg:
                xo.request("destroy")
            mgr.request("destroy")
        return infos

    def output(self, name: str | None) -> OutputInfo:
        """The output called `name` (the only one when `name` is None); NoSuchOutput otherwise.
        The other outputs' proxies are released."""
        infos = self.outputs()
        if name is None and len(infos) == 1:
            chosen = infos[0]
        else:
            found = [i for i in infos if i.name == name] if name else []
            if not found:
                names = ", ".join(sorted(i.name or "?" for i in infos)) or "none"
                what = f"no output named {name!r}" if name else "more than one output"
                raise NoSuchOutput(f"{what} on the compositor at {self.path} (outputs: {names})")
            chosen = found[0]
        for i in infos:
            if i is not chosen and i.proxy.version >= 3:
                i.proxy.request("release")
        return chosen

    def close(self) -> None:
        if self.closed:
            return
        try:
            self.conn.flush()
        except OSError:
            pass
        self.closed = True
        self.conn.close()

    def __enter__(self) -> Display:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _set_pos(info: OutputInfo, x: int, y: int) -> None:
    info.x, info.y = x, y


def _watch_output(info: OutputInfo) -> None:
    def mode(flags: int, w: int, h: int, refresh: int) -> None:
        if flags & 1:  # WL_OUTPUT_MODE_CURRENT
            info.width, info.height, info.refresh_mhz = w, h, refresh

    def geometry(x, y, _pw, _ph, _sub, make, model, transform) -> None:
        info.x, info.y = x, y
        info.extra.update(make=make, model=model, transform=transform)

    info.proxy.on("mode", mode).on("geometry", geometry)
    info.proxy.on("name", lambda n: setattr(info, "name", n))
    info.proxy.on("description", lambda d: setattr(info, "description", d))


_CREATES = {
    ("wl_display", "sync"): "wl_callback",
    ("wl_display", "get_registry"): "wl_registry",
    ("wl_compositor", "create_surface"): "wl_surface",
    ("wl_shm", "create_pool"): "wl_shm_pool",
    ("wl_shm_pool", "create_buffer"): "wl_buffer",
    ("wl_surface", "frame"): "wl_callback",
    ("wl_seat", "get_pointer"): "wl_pointer",
    ("wl_seat", "get_keyboard"): "wl_keyboard",
    ("zxdg_output_manager_v1", "get_xdg_output"): "zxdg_output_v1",
    ("xdg_wm_base", "get_xdg_surface"): "xdg_surface",
    ("xdg_surface", "get_toplevel"): "xdg_toplevel",
    ("zwlr_screencopy_manager_v1", "capture_output"): "zwlr_screencopy_frame_v1",
    ("zwlr_screencopy_manager_v1", "capture_output_region"): "zwlr_screencopy_frame_v1",
    ("zwp_virtual_keyboard_manager_v1", "create_virtual_keyboard"): "zwp_virtual_keyboard_v1",
    ("zwlr_virtual_pointer_manager_v1", "create_virtual_pointer"): "zwlr_virtual_pointer_v1",
    (
        "zwlr_virtual_pointer_manager_v1",
        "create_virtual_pointer_with_output",
    ): "zwlr_virtual_pointer_v1",
    ("zkde_screencast_unstable_v1", "stream_output"): "zkde_screencast_stream_unstable_v1",
    ("zkde_screencast_unstable_v1", "stream_window"): "zkde_screencast_stream_unstable_v1",
    ("zkde_screencast_unstable_v1", "stream_virtual_output"): "zkde_screencast_stream_unstable_v1",
    ("zkde_screencast_unstable_v1", "stream_region"): "zkde_screencast_stream_unstable_v1",
}


def _creates(interface: str, request: str) -> str:
    try:
        return _CREATES[(interface, request)]
    except KeyError:
        raise WireError(f"{interface}.{request} creates an object of unknown interface")


class ShmPool:
    """A memfd-backed wl_shm_pool with one buffer of `stride * height` bytes at offset 0,
    mapped here so its pixels can be read or written directly."""

    def __init__(self, shm: Proxy, width: int, height: int, stride: int, fmt: int):
        self.width, self.height, self.stride, self.format = width, height, stride, fmt
        self.size = stride * height
        fd = os.memfd_create("wayland-shm", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, self.size)
            self.map = mmap.mmap(fd, self.size)
            self.pool = shm.request("create_pool", fd, self.size)
            shm.display.flush()  # the fd is sent before we close our copy
        finally:
            os.close(fd)
        self.buffer = self.pool.request("create_buffer", 0, width, height, stride, fmt)

    def matches(self, width: int, height: int, stride: int, fmt: int) -> bool:
        return (width, height, stride, fmt) == (self.width, self.height, self.stride, self.format)

    def destroy(self) -> None:
        if self.buffer.alive:
            self.buffer.request("destroy")
        if self.pool.alive:
            self.pool.request("destroy")
        try:
            self.map.close()
        except BufferError:
            pass  # a numpy view still holds it; the mapping goes with that view
