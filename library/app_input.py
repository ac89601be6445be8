"""Validation of an app entry posted to `POST /api/apps`, field by field of the spec.

Known fields are type-checked; unknown keys are dropped; an out-of-range `encoder-preset` is
dropped silently (the host default stays), as the spec asks. `elevated: true` (the entry's or
a prep step's) is refused with the reason, and `output` must be a file the host can append to
(games.appfields).
"""

from __future__ import annotations

from games import appfields
from library import catalog, conf

STRING_FIELDS = ("cmd", "working-dir", "output", "image-path")
MAX_TEXT = 4096
MAX_LIST = 64


class AppInputError(ValueError):
    pass


def _text(value, name: str) -> str:
    if not isinstance(value, str):
        raise AppInputError(f"{name} must be a string")
    if len(value) > MAX_TEXT or "\x00" in value:
        raise AppInputError(f"{name} must be under {MAX_TEXT} characters without NUL")
    return value


def _bool(value, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise AppInputError(f"{name} must be true or false")


def _int(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise AppInputError(f"{name} must be an integer")
    try:
        return int(value)
    except ValueError:
        raise AppInputError(f"{name} must be an integer") from None


def clean(body: dict) -> tuple[int, dict]:
    """(index, app) from a request body; AppInputError with a message for the caller."""
    if "index" not in body:
        raise AppInputError("index is required (-1 creates)")
    index = _int(body["index"], "index")
    name = body.get("name")
    if not isinstance(name, str) or not name.strip():
        raise AppInputError("name must be a non-empty string")
    if len(name) > conf.MAX_TITLE:
        raise AppInputError(f"name longer than {conf.MAX_TITLE} characters")
    app: dict = {"name": _text(name, "name")}
    for key in STRING_FIELDS:
        if key in body and body[key] is not None:
            app[key] = _text(body[key], key)
    for key in catalog.BOOL_FIELDS:
        if key in body and body[key] is not None:
            app[key] = _bool(body[key], key)
    if app.get("elevated"):
        raise AppInputError(f"elevated: {appfields.ELEVATED_REASON}")
    if app.get("output"):
        try:
            appfields.check_output_path(app["output"])
        except ValueError as exc:
            raise AppInputError(str(exc)) from None
    if body.get("exit-timeout") is not None:
        timeout = _int(body["exit-timeout"], "exit-timeout")
        if not 0 <= timeout <= 3600:
            raise AppInputError("exit-timeout must be 0 to 3600 seconds")
        app["exit-timeout"] = timeout
    if body.get("env") is not None:
        env = body["env"]
        if not isinstance(env, dict) or len(env) > MAX_LIST:
            raise AppInputError("env must be an object of strings")
        app["env"] = {_text(k, "env key"): _text(v, f"env.{k}") for k, v in env.items()}
    if body.get("prep-cmd"):
        prep = body["prep-cmd"]
        if not isinstance(prep, list) or len(prep) > MAX_LIST:
            raise AppInputError(f"prep-cmd must be an array of at most {MAX_LIST} steps")
        steps = []
        for i, step in enumerate(prep):
            if not isinstance(step, dict):
                raise AppInputError(f"prep-cmd[{i}] must be an object")
            item = {
                "do": _text(step.get("do", ""), f"prep-cmd[{i}].do"),
                "undo": _text(step.get("undo", ""), f"prep-cmd[{i}].undo"),
            }
            if "elevated" in step:
                item["elevated"] = _bool(step["elevated"], f"prep-cmd[{i}].elevated")
                if item["elevated"]:
                    raise AppInputError(f"prep-cmd[{i}].elevated: {appfields.ELEVATED_REASON}")
            steps.append(item)
        app["prep-cmd"] = steps
    if body.get("detached"):
        detached = body["detached"]
        if not isinstance(detached, list) or len(detached) > MAX_LIST:
            raise AppInputError("detached must be an array of strings")
        app["detached"] = [_text(d, "detached[]") for d in detached]
    if body.get("encoder-preset") is not None:
        preset = _int(body["encoder-preset"], "encoder-preset")
        if -1 <= preset <= 2:
            app["encoder-preset"] = preset
    image = app.get("image-path")
    if image and catalog.resolve_image(image) is None:
        raise AppInputError("image-path must name a valid PNG file")
    return index, app
