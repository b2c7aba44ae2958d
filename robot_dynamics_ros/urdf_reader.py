"""Reading URDF text and files, bounded: descriptions are data.

:func:`read_urdf_file` reads regular files only; :func:`parse_urdf_xml` parses streaming and bounded
(:data:`MAX_URDF_BYTES`, :data:`MAX_URDF_ELEMENTS`, :data:`MAX_URDF_DEPTH`, :data:`MAX_ATTRIBUTE_CHARS`) and keeps
only what the dynamics need: ``<visual>``, ``<collision>`` and other content are skipped, never stored; meshes
are never opened; DOCTYPE/ENTITY declarations are refused (entity expansion). Messages quote at most
:data:`EXCERPT_CHARS` characters of the input (:func:`excerpt`, :func:`quote_name`). Errors are
:class:`robot_dynamics_ros.errors.URDFError`, one line.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from xml.parsers import expat

from robot_dynamics_ros.errors import URDFError
from robot_dynamics_ros.share import read_regular_file

__all__ = ["MAX_URDF_BYTES", "MAX_URDF_ELEMENTS", "MAX_URDF_DEPTH", "MAX_ATTRIBUTE_CHARS", "EXCERPT_CHARS",
           "excerpt", "quote_name", "quote_names", "is_xml_text", "read_urdf_file", "parse_urdf_xml"]

#: largest URDF accepted, bytes (UTF-8): the largest of example-robot-data is 0.2 MB
MAX_URDF_BYTES = 16 * 1024 * 1024
#: most XML elements accepted in one URDF (all of them, <visual> content included; the largest of
#: example-robot-data has 3 851)
MAX_URDF_ELEMENTS = 200_000
#: deepest element nesting accepted (the deepest of example-robot-data is below 10; a description nested
#: thousands deep is an attack on recursive readers downstream, e.g. robot_state_publisher's)
MAX_URDF_DEPTH = 100
#: longest attribute value accepted on the elements that are read (names, numbers; the longest name in
#: example-robot-data has 113 characters)
MAX_ATTRIBUTE_CHARS = 256
#: at most this many characters of the input are quoted in an error message
EXCERPT_CHARS = 60


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """The first ``limit`` characters of ``text`` (control characters shown as escapes), for messages."""
    head = text[:limit]
    shown = head.encode("unicode_escape", errors="backslashreplace").decode("ascii")[:limit]
    return shown + ("..." if len(text) > limit or len(shown) < len(head) else "")


def quote_name(name) -> str:
    """``repr`` of a name from the input for a message, cut to :data:`EXCERPT_CHARS` characters."""
    text = str(name)
    return repr(text) if len(text) <= EXCERPT_CHARS else repr(text[:EXCERPT_CHARS]) + "..."


def quote_names(names, limit: int = 5) -> str:
    """``'a', 'b', 'c' and 4 more``: at most ``limit`` names (each :func:`quote_name`), for messages."""
    names = list(names)
    shown = ", ".join(quote_name(n) for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def is_xml_text(source) -> bool:
    """True when ``source`` is a str whose first character after blanks (and a BOM) is ``<``."""
    return isinstance(source, str) and source[:4096].lstrip("\ufeff \t\r\n").startswith("<")


def read_urdf_file(path: str | Path) -> tuple[str, str]:
    """``(text, label)`` of a URDF file; label is the path as given (``~`` expanded).

    Read by :func:`robot_dynamics_ros.share.read_regular_file`: regular files only (a FIFO, device, socket or
    directory is refused without being opened), at most :data:`MAX_URDF_BYTES` bytes, UTF-8.

    Raises:
        URDFError: ``"URDF '<path>': not a readable regular file"`` (the same words for a missing file), or
        too large, or not UTF-8, on one line.
    """
    label = str(Path(str(path)).expanduser()) if len(str(path)) <= 4096 else str(path)
    data = read_regular_file(path, "URDF", MAX_URDF_BYTES, error=URDFError)
    try:
        return data.decode("utf-8-sig"), label
    except UnicodeDecodeError as exc:
        raise URDFError(f"URDF {label}: not UTF-8 text (byte {exc.start})") from None


# elements kept by the reader, by parent path; everything else (visual, collision, transmission, gazebo,
# and whatever they contain) is only counted
_KEEP_CHILDREN = {("robot",): ("link", "joint"), ("robot", "link"): ("inertial",),
                  ("robot", "link", "inertial"): ("origin", "mass", "inertia")}


def parse_urdf_xml(xml: str, label: str) -> ET.Element:
    """Parse URDF text into a small element tree holding only what the dynamics need.

    The parse is streaming (expat callbacks, no recursion, no deep copy): ``<robot>``, its ``<link>`` and
    ``<joint>`` elements, a link's ``<inertial>`` with ``<origin>``/``<mass>``/``<inertia>``, and the direct
    children of a joint are kept; all other content (``<visual>``, ``<collision>``, ``<gazebo>``, text) is
    skipped however deeply nested. Limits: :data:`MAX_URDF_BYTES` bytes, :data:`MAX_URDF_ELEMENTS`
    elements, :data:`MAX_ATTRIBUTE_CHARS` characters per kept attribute; DOCTYPE/ENTITY declarations
    are refused (entity expansion).

    Raises:
        URDFError: one line, ``"URDF <label>: <reason>"``, quoting at most :data:`EXCERPT_CHARS` characters.
    """
    prefix = f"URDF {label}: "
    if not isinstance(xml, str):
        raise URDFError(f"{prefix}expected URDF XML text, got {type(xml).__name__}")
    if len(xml) > MAX_URDF_BYTES or len(xml.encode("utf-8", errors="surrogatepass")) > MAX_URDF_BYTES:
        raise URDFError(f"{prefix}more than the {MAX_URDF_BYTES} bytes accepted (MAX_URDF_BYTES)")
    text = xml.lstrip("\ufeff \t\r\n")
    if not text:
        raise URDFError(f"{prefix}empty text (no URDF XML)" if not xml else f"{prefix}only whitespace (no URDF XML)")
    if not text.startswith("<"):
        raise URDFError(f"{prefix}not URDF XML (starts with '{excerpt(text)}')")

    parser = expat.ParserCreate()
    stack: list[tuple[str, ET.Element | None, tuple[str, ...] | None]] = []  # (tag, kept element, path)
    count = 0
    holder: list[ET.Element] = []

    def refuse_declaration(*_args) -> None:
        raise URDFError(f"{prefix}DOCTYPE/ENTITY declarations are refused (XML entity expansion)")

    def start(tag: str, attrib: dict) -> None:
        nonlocal count
        count += 1
        if count > MAX_URDF_ELEMENTS:
            raise URDFError(f"{prefix}more than {MAX_URDF_ELEMENTS} XML elements (MAX_URDF_ELEMENTS)")
        if len(stack) >= MAX_URDF_DEPTH:
            raise URDFError(f"{prefix}XML elements nested more than {MAX_URDF_DEPTH} deep (MAX_URDF_DEPTH)")
        if not stack:
            if tag != "robot":
                raise URDFError(f"{prefix}the root element is <{excerpt(tag)}>, expected <robot>")
            path: tuple[str, ...] | None = ("robot",)
            el = ET.Element(tag)
            holder.append(el)
        else:
            _, parent, ppath = stack[-1]
            keep = parent is not None and (tag in _KEEP_CHILDREN.get(ppath, ())
                                           or (ppath is not None and ppath[-1:] == ("joint",) and len(ppath) == 2))
            if not keep:
                stack.append((tag, None, None))
                return
            path = (*ppath, tag)
            el = ET.SubElement(parent, tag)
        for k, v in attrib.items():
            if len(v) > MAX_ATTRIBUTE_CHARS:
                raise URDFError(f"{prefix}<{tag}> attribute {quote_name(k)} has {len(v)} characters, more than the "
                                f"{MAX_ATTRIBUTE_CHARS} accepted ('{excerpt(v)}')")
            el.set(k, v)
        stack.append((tag, el, path))

    def end(_tag: str) -> None:
        stack.pop()

    parser.StartDoctypeDeclHandler = refuse_declaration
    parser.EntityDeclHandler = refuse_declaration
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    try:
        parser.Parse(text, True)
    except expat.ExpatError as exc:
        raise URDFError(f"{prefix}not well-formed XML: {expat.errors.messages[exc.code] if exc.code else exc} "
                        f"(line {exc.lineno}, column {exc.offset})") from None
    if not holder:
        raise URDFError(f"{prefix}no <robot> element")
    return holder[0]
