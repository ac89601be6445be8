"""nvhttp XML documents: `<root status_code=".." [status_message=".."]>children</root>`.

The HTTP status line is always 200; clients read the `status_code` attribute.
"""

from __future__ import annotations

from xml.etree import ElementTree as ET

DECLARATION = b'<?xml version="1.0" encoding="utf-8"?>\n'
NOT_AUTHORIZED = "The client is not authorized. Certificate verification failed."


def _clean(text: str) -> str:
    # XML 1.0 cannot carry most control characters at all; drop them rather than fail.
    return "".join(ch for ch in text if ch in "\t\n\r" or ord(ch) >= 32)


def document(
    status: int = 200,
    message: str = "",
    children: list[tuple[str, object]] | dict | None = None,
    attrs: dict[str, str] | None = None,
) -> bytes:
    root = ET.Element("root", {"status_code": str(status)})
    if message:
        root.set("status_message", _clean(message))
    for key, value in (attrs or {}).items():
        root.set(key, _clean(str(value)))
    items = children.items() if isinstance(children, dict) else (children or [])
    for tag, value in items:
        if isinstance(value, ET.Element):
            root.append(value)
        else:
            ET.SubElement(root, tag).text = _clean(str(value))
    return DECLARATION + ET.tostring(root, encoding="utf-8", xml_declaration=False)


def element(tag: str, children: dict) -> ET.Element:
    el = ET.Element(tag)
    for key, value in children.items():
        ET.SubElement(el, key).text = _clean(str(value))
    return el


def not_authorized(path: str) -> bytes:
    return document(401, NOT_AUTHORIZED, attrs={"query": path})


def not_found(path: str) -> bytes:
    return document(404, "Not Found", attrs={"query": path})
