"""Console side of plugins: the Plugins page and the proxy to plugin UIs.

The proxy (`/plugins/<id>/ui/<path>`) is how an operator opens a plugin's UI: the UI listens on
127.0.0.1 only, the console relays under the operator's login (the same check as every console
page) and adds the plugin's secret as `X-Plugin-Secret` on the way in; the browser never sees
the secret. What comes back is served in a CSP sandbox without `allow-same-origin`, so a plugin's
page runs as an opaque origin: it can neither read the console's cookies nor call the host's
routes with the operator's session. Hop-by-hop headers and cookies are stripped both ways;
bodies are bounded; a plugin that does not answer is a 502.
"""

from __future__ import annotations

import http.client
import re

from django.http import HttpResponse, HttpResponseRedirect
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.http import require_http_methods

from hostmgmt.console.views import CSP, console_page, page
from plugins import env as plugin_env
from plugins import registry, runner_control, runtime

PROXY_TIMEOUT_S = 10.0
PROXY_MAX_BODY = 8 * 1024 * 1024
HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "trailers",
    "transfer-encoding",
    "upgrade",
}
# Never forwarded to the plugin: the operator's credentials and anything it could take for ours.
_REQUEST_DROP = HOP_BY_HOP | {
    "host",
    "cookie",
    "authorization",
    "x-plugin-secret",
    "x-csrftoken",
    "content-length",
}
_RESPONSE_DROP = HOP_BY_HOP | {"set-cookie", "content-length", "content-security-policy"}
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
    except Exception as exc:  # noqa: BLE001 - Redis down: the page still shows what runs
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
    return page(request, "plugins.html", {"rows": rows, "error": error, "runtime": runtime.view()})


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
    except Exception:  # noqa: BLE001 - Redis down
        return _plain(503, "plugin registrations are unavailable; try again shortly")
    ui = (entry or {}).get("ui")
    if not ui:
        return _plain(404, "this plugin is not registered or serves no UI")
    target = "/" + path + (f"?{request.META['QUERY_STRING']}" if request.META.get("QUERY_STRING")
                           else "")  # fmt: skip
    headers = {k: v for k, v in request.headers.items() if k.lower() not in _REQUEST_DROP}
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
    response = HttpResponse(body, status=upstream.status)
    for key, value in upstream.getheaders():
        if key.lower() not in _RESPONSE_DROP:
            response[key] = value
    if "content-type" not in {k.lower() for k, _ in upstream.getheaders()}:
        response["Content-Type"] = "application/octet-stream"
    return response


def _plain(status: int, message: str) -> HttpResponse:
    return HttpResponse(message + "\n", status=status, content_type="text/plain; charset=utf-8")
