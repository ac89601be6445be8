"""Console side of plugins: the Plugins page and the proxy to plugin UIs.

The proxy (`/plugins/<id>/ui/<path>`) is how an operator opens a plugin's UI: the UI listens on
127.0.0.1 only, the console relays under the operator's login (the same check as every console
page) and adds the plugin's secret as `X-Plugin-Secret` on the way in; the browser never sees
the secret. What comes back is served in a CSP sandbox without `allow-same-origin`, so a plugin's
page runs as an opaque origin: it can neither read the console's cookies nor call the host's
routes with the operator's session. Bodies are bounded; a plugin that does not answer is a 502.

Headers are allow-listed both ways (`REQUEST_HEADERS`, `RESPONSE_HEADERS`): a plugin's answer
reaches the console's origin, so `Location`, `Refresh`, `Clear-Site-Data`, `Set-Cookie`,
`Service-Worker-Allowed` and anything not named would act on the console itself. A redirect is
kept only when it stays inside the plugin's UI (a relative or absolute path, resolved on the
plugin's side and re-rooted under `/plugins/<id>/ui`); any other redirect is a 502.

Before relaying, the port must still be listened on by the plugin's own processes
(`runner_control.ui_port_error`), so a registration cannot make the console fetch another local
service.
"""

from __future__ import annotations

import http.client
import re
from urllib.parse import urljoin, urlsplit

from django.http import HttpResponse, HttpResponseRedirect
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.http import require_http_methods

from console.views import CSP, console_page, page
from plugins import env as plugin_env
from plugins import registry, runner_control, runtime

PROXY_TIMEOUT_S = 10.0
PROXY_MAX_BODY = 8 * 1024 * 1024
# The only request headers the plugin gets from the browser: never the operator's credentials,
# cookies or anything it could take for ours (the proxy adds its own X-Plugin-Secret).
REQUEST_HEADERS = frozenset(
    {"accept", "accept-language", "if-none-match", "if-modified-since", "user-agent"}
)
# The only response headers the browser gets from the plugin: they describe the body and its
# caching, nothing that acts on the console's origin. Location is handled on its own.
RESPONSE_HEADERS = frozenset(
    {"content-type", "cache-control", "etag", "last-modified", "content-language", "vary",
     "expires"}
)  # fmt: skip
_REDIRECTS = {301, 302, 303, 307, 308}
_PLUGIN_ORIGIN = "http://plugin.invalid"
SANDBOX_CSP = CSP.replace("form-action 'self'", "form-action 'none'") + (
    "; sandbox allow-scripts allow-popups"
)
_SAFE_PATH = re.compile(r"[A-Za-z0-9._~!$&'()*+,;=:@/%-]*")


def _installed_safe() -> tuple[list, str]:
    try:
        return plugin_env.installed(), ""
    except (RuntimeError, OSError, ValueError) as exc:
        return [], f"listing the plugin environment failed: {exc}"


def _rows() -> tuple[list[dict], str]:
    installed, error = _installed_safe()
    status = runner_control.status()
    try:
        registered = {s["id"]: s for s in registry.summaries()}
    except Exception as exc:  # Redis down: the page still shows what runs
        registered, error = {}, error or f"registrations unavailable: {type(exc).__name__}"
    rows = []
    ids = [p.plugin_id for p in installed] + sorted(
        set(registered) - {p.plugin_id for p in installed}
    )
    by_id = {p.plugin_id: p for p in installed}
    for plugin_id in ids:
        inst = by_id.get(plugin_id)
        run = status.get(plugin_id, {})
        reg = registered.get(plugin_id)
        rows.append(
            {
                "id": plugin_id,
                "pkg": inst.pkg if inst else "",
                "version": inst.version if inst else (reg or {}).get("version", ""),
                "installed": inst is not None,
                "running": bool(run.get("running")),
                "pid": run.get("pid"),
                "restarts": run.get("restarts", 0),
                "last_exit": run.get("last_exit"),
                "log_dropped": run.get("log_dropped", 0),
                "log": run.get("log", [])[-15:],
                "registered": reg,
                "ui_url": f"/plugins/{plugin_id}/ui/" if reg and reg.get("ui") else "",
            }
        )
    return rows, error


@console_page
@csrf_protect
@require_http_methods(["GET", "POST"])
def plugins_page(request):
    if request.method == "POST":
        enabled = request.POST.get("enabled") == "on"
        runtime.switch(enabled)
        return HttpResponseRedirect("/plugins")
    rows, error = _rows()
    return page(
        request,
        "plugins.html",
        {"rows": rows, "error": error, "runtime": runtime.view(), "conflicts": _conflicts()},
    )


def _conflicts() -> list[dict]:
    """Ids two distributions declare: neither runs, and the page says which packages."""
    try:
        found = plugin_env.conflicts()
    except (RuntimeError, OSError, ValueError):
        return []  # _installed_safe already reports the listing failure
    return [
        {"id": plugin_id, "pkgs": ", ".join(f"{d.pkg} {d.version}" for d in decls)}
        for plugin_id, decls in sorted(found.items())
    ]


@require_http_methods(["GET", "HEAD"])
def ui_proxy(request, plugin_id: str, path: str = ""):
    """The operator's login as on every console page, then the sandbox CSP over the console's
    (which `console_page` sets)."""
    response = _proxied(request, plugin_id=plugin_id, path=path)
    response["Content-Security-Policy"] = SANDBOX_CSP
    return response


@console_page
def _proxied(request, plugin_id: str, path: str = ""):
    # GAP: plugin UIs are read-only through the proxy (GET/HEAD): a plugin page's forms
    # would need the console's CSRF token, which the sandboxed page must not have.
    if not plugin_env.PLUGIN_ID.fullmatch(plugin_id) or not _SAFE_PATH.fullmatch(path):
        return _plain(404, "no such plugin UI")
    try:
        entry = registry.get(plugin_id)
    except Exception:  # Redis down
        return _plain(503, "plugin registrations are unavailable; try again shortly")
    ui = (entry or {}).get("ui")
    if not ui:
        return _plain(404, "this plugin is not registered or serves no UI")
    not_its_own = runner_control.ui_port_error(plugin_id, int(ui["port"]))
    if not_its_own:
        return _plain(502, f"the plugin's UI port is refused: {not_its_own}")
    target = "/" + path + (f"?{request.META['QUERY_STRING']}" if request.META.get("QUERY_STRING")
                           else "")  # fmt: skip
    headers = {k: v for k, v in request.headers.items() if k.lower() in REQUEST_HEADERS}
    headers["X-Plugin-Secret"] = ui["secret"]
    headers["X-Forwarded-Prefix"] = f"/plugins/{plugin_id}/ui"
    conn = http.client.HTTPConnection("127.0.0.1", int(ui["port"]), timeout=PROXY_TIMEOUT_S)
    try:
        conn.request(request.method, target, headers=headers)
        upstream = conn.getresponse()
        body = upstream.read(PROXY_MAX_BODY + 1)
        if len(body) > PROXY_MAX_BODY:
            return _plain(502, "the plugin's answer is larger than the proxy passes")
    except (OSError, http.client.HTTPException):
        return _plain(502, "the plugin's UI does not answer")
    finally:
        conn.close()
    location = None
    if upstream.status in _REDIRECTS and upstream.getheader("Location") is not None:
        location = _same_plugin_location(plugin_id, target, upstream.getheader("Location"))
        if location is None:
            return _plain(502, "the plugin redirected outside its UI")
    response = HttpResponse(body, status=upstream.status)
    for key, value in upstream.getheaders():
        if key.lower() in RESPONSE_HEADERS and "\n" not in value and "\r" not in value:
            response[key] = value
    if "content-type" not in {k.lower() for k, _ in upstream.getheaders()}:
        response["Content-Type"] = "application/octet-stream"
    if location:
        response["Location"] = location
    return response


def _same_plugin_location(plugin_id: str, target: str, location: str) -> str | None:
    """A plugin's redirect as a console URL inside its own UI, or None when it leaves it.

    Resolved against the plugin-side URL (dot segments removed, so `../..` stops at the plugin's
    root) and re-rooted under `/plugins/<id>/ui`; a scheme or host of its own is refused."""
    if any(ch in location for ch in "\r\n\\") or not location.strip():
        return None
    resolved = urlsplit(urljoin(_PLUGIN_ORIGIN + target, location.strip()))
    if f"{resolved.scheme}://{resolved.netloc}" != _PLUGIN_ORIGIN:
        return None
    if not _SAFE_PATH.fullmatch(resolved.path) or not _SAFE_PATH.fullmatch(resolved.query):
        return None
    out = f"/plugins/{plugin_id}/ui{resolved.path}"
    return out + (f"?{resolved.query}" if resolved.query else "")


def _plain(status: int, message: str) -> HttpResponse:
    return HttpResponse(message + "\n", status=status, content_type="text/plain; charset=utf-8")
