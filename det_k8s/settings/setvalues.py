"""helm's `--set` / `--set-string` syntax, parsed the way helm parses it.

    a.b=c,d=e          two assignments (nested key, top-level key)
    list={x,y,z}       a list value
    servers[0].port=80 list indexes, created as needed
    key=one\\,two      a backslash escapes `,` `.` `=` `[` `{` and itself
    key=null           removes the key when merged (as helm does)

Typing follows helm: `true`/`false` become booleans, `null` becomes null, integers without a
leading zero become ints, everything else (including `1.5`) stays a string. `--set-string` keeps
every value a string.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from ..safe_read import MAX_DEPTH
from .secret_settings import clip, mask_set_expression
from .source import Path

MAX_INDEX = 65536


@dataclass(frozen=True)
class Assignment:
    path: Path
    value: Any


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def peek(self) -> str | None:
        return self.text[self.pos] if self.pos < len(self.text) else None

    def take(self) -> str:
        char = self.text[self.pos]
        self.pos += 1
        return char

    def read_until(self, stops: str) -> tuple[str, str | None]:
        """Read with backslash escapes until one of `stops`; return (text, stop char or None)."""
        out: list[str] = []
        while (char := self.peek()) is not None:
            if char == "\\":
                self.take()
                if self.peek() is None:
                    out.append("\\")
                    break
                out.append(self.take())
                continue
            if char in stops:
                self.take()
                return "".join(out), char
            out.append(self.take())
        return "".join(out), None


def typed_value(text: str, as_string: bool) -> Any:
    """helm's typedVal: booleans, null and plain integers are typed; the rest stays text."""
    if as_string:
        return text
    lowered = text.lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    if lowered == "null":
        return None
    if text == "0":
        return 0
    if len(text) > 1 and text[0] == "0":
        return text
    body = text[1:] if text[:1] in "+-" else text
    if body.isdigit() and body.isascii() and len(body) <= 19:  # more digits cannot be an int64: helm keeps text
        number = int(text)
        if -(2**63) <= number < 2**63:
            return number
    return text


def parse_set(expression: str, *, as_string: bool = False, flag: str = "--set") -> list[Assignment]:
    """Parse one `--set` argument into assignments; a malformed one is a UsageError naming it."""

    def fail(reason: str) -> UsageError:
        shown = mask_set_expression(expression)
        if shown != expression:  # a secret is involved: even the parser's reason could quote part of it
            reason = "cannot parse it (the value of a secret key is not shown)"
        return UsageError(f"{flag} {clip(shown)!r}: {reason}", hint="use key.sub=value, list={a,b}, key[0]=value")

    reader = _Reader(expression)
    result: list[Assignment] = []
    if not expression:
        raise fail("empty expression")
    while reader.peek() is not None:
        path: list[str | int] = []
        while True:
            key, stop = reader.read_until("=[.,")
            if key:
                path.append(key)
                if len(path) > MAX_DEPTH:
                    raise fail(f"a key more than {MAX_DEPTH} levels deep")
            elif stop != "[" or not path:
                if stop == "[" and not path:
                    raise fail("a list index needs a key before it")
                raise fail("empty key")
            if stop == ".":
                continue
            if stop == "[":
                index_text, close = reader.read_until("]")
                if close is None or not index_text.isdigit():
                    raise fail(f"bad list index [{index_text}")
                index = int(index_text)
                if index > MAX_INDEX:
                    raise fail(f"list index {index} is larger than {MAX_INDEX}")
                path.append(index)
                if len(path) > MAX_DEPTH:
                    raise fail(f"a key more than {MAX_DEPTH} levels deep")
                nxt = reader.peek()
                if nxt == "=":
                    reader.take()
                    break
                if nxt in (".", "["):
                    if nxt == ".":
                        reader.take()
                    continue
                raise fail(f"expected '=', '.' or '[' after [{index}]")
            if stop == "=":
                break
            raise fail(f"key {'.'.join(str(p) for p in path) or key!r} has no value")
        if reader.peek() == "{":
            reader.take()
            body, close = reader.read_until("}")
            if close is None:
                raise fail("list value is missing its closing '}'")
            items = [] if body == "" else _split_list(body)
            value: Any = [typed_value(item, as_string) for item in items]
            after = reader.peek()
            if after not in (None, ","):
                raise fail("unexpected text after '}'")
            if after == ",":
                reader.take()
        else:
            text, _ = reader.read_until(",")
            value = typed_value(text, as_string)
        result.append(Assignment(tuple(path), value))
    return result


def _split_list(body: str) -> list[str]:
    items: list[str] = []
    current: list[str] = []
    escaped = False
    for char in body:
        if escaped:
            current.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ",":
            items.append("".join(current))
            current = []
        else:
            current.append(char)
    items.append("".join(current))
    return items


def apply_assignment(target: dict[str, Any], assignment: Assignment) -> None:
    """Write one assignment into nested data, creating maps and lists on the way (like helm)."""
    node: Any = target
    path = assignment.path
    for depth, part in enumerate(path):
        last = depth == len(path) - 1
        nxt = None if last else path[depth + 1]
        fresh: Any = [] if isinstance(nxt, int) else {}
        if isinstance(part, int):
            if not isinstance(node, list):  # pragma: no cover - guarded by the caller's container choice
                raise UsageError(f"--set: {part} is a list index but the value there is not a list")
            while len(node) <= part:
                node.append(None)
            if last:
                node[part] = assignment.value
            else:
                if not isinstance(node[part], dict | list) or isinstance(node[part], list) != isinstance(nxt, int):
                    node[part] = fresh
                node = node[part]
        else:
            if last:
                node[part] = assignment.value
            else:
                child = node.get(part)
                if not isinstance(child, dict | list) or isinstance(child, list) != isinstance(nxt, int):
                    node[part] = fresh
                node = node[part]
