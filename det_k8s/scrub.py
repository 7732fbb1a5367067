"""The one scrubber: secrets removed, by what they are, from everything det-k8s prints.

Secrets reach output in more forms than their own text: helm prints a Secret's data base64-encoded,
a URL carries them percent-encoded, an SDK quotes only the `AccountKey=` part of a connection
string or a whole `Authorization` header, a kubeconfig's server URL may hold `user:password@`, a
credential plugin may echo its token. So `Scrubber` removes

- each known secret (the settings' secret keys, kubeconfig credentials, storage keys) in every
  derived form: as written, stripped, backslash-escaped as `repr` and JSON show it, URL-encoded,
  base64 (standard and URL-safe, whole with padding as in a Secret's `data`, and the aligned middle
  of its encoding inside a longer encoded text), and each secret part of a connection string or SAS
  token on its own;
- secret-looking fragments whatever their origin: `AccountKey=`, `SharedAccessSignature=`, `sig=`,
  `X-Amz-Signature=`, `X-Amz-Credential=`, `X-Amz-Security-Token=`, `Signature=`, `Credential=`,
  `password=`, `token=`, `Authorization` header values, bearer tokens, JSON Web Tokens, and the
  `user:password@` of URLs.

Known secrets are registered once, where they are read (`register`), and `scrub` applies them to
every line `cli/output.py` prints and to every tool's stderr (`tools/process.py`), so a path that
forgets to scrub cannot exist.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from collections.abc import Iterable
from urllib.parse import quote, quote_plus

MASK = "***"
MIN_SECRET = 3  # shorter values would mask ordinary text everywhere and protect nothing
MIN_ENCODED = 8  # the middle of an encoding inside a longer one: shorter pieces match by chance

# key=value fragments whose value is secret: connection strings (`;`-separated), query strings
# (`&`-separated) and SigV4 headers (`,`-separated).
_SECRET_FIELDS = re.compile(
    r"(?i)\b(AccountKey|SharedAccessSignature|sig|X-Amz-Signature|X-Amz-Credential|X-Amz-Security-Token"
    r"|Signature|Credential|AWSAccessKeyId|access_token|refresh_token|id_token|client_secret|password|passwd|pwd"
    r"|token|apikey|api_key)=([^;&,\s'\"<>]+)"
)
# A bearer token, and a JSON Web Token wherever it appears (kubeconfig tokens, cloud identity tokens).
_BEARER = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{8,}")
_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*")
# An Authorization header, as `Authorization: value`, `'Authorization': 'value'` or `Authorization=value`.
_AUTH_HEADER = re.compile(r"(?i)(['\"]?(?:proxy-)?authorization['\"]?\s*[:=]\s*)(['\"]?)([^'\"\r\n]+)")
# user:password@ in a URL.
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@'\"]+@")
# The part of a connection string or SAS token that is secret on its own.
_SECRET_PARTS = re.compile(r"(?i)(?:^|[;&?])(?:AccountKey|SharedAccessSignature|sig)=([^;&]+)")


def _base64_forms(secret: str) -> set[str]:
    """The secret base64-encoded: whole (as a Secret's data holds it) and, for each of the three
    alignments it can have inside a longer encoded text, the characters that depend on it alone."""
    raw = secret.encode("utf-8")
    forms: set[str] = set()
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        forms.add(encode(raw).decode("ascii"))
        for offset in range(3):
            encoded = encode(b"\0" * offset + raw).decode("ascii").rstrip("=")
            start = -(-offset * 8 // 6)  # the first character holding no bit of the padding in front
            end = (offset + len(raw)) * 8 // 6  # the last character holding only bits of the secret
            core = encoded[start:end]
            if len(core) >= MIN_ENCODED:
                forms.add(core)
    return forms


def _variants(secret: str) -> set[str]:
    """The forms a secret takes inside messages."""
    forms = {secret, secret.strip()}
    escaped = secret.encode("unicode_escape").decode("ascii")
    forms |= {escaped, escaped.replace("\\", "\\\\"), quote(secret, safe=""), quote_plus(secret),
              json.dumps(secret)[1:-1]}
    forms |= _base64_forms(secret)
    if secret.strip() != secret and secret.strip():
        forms |= _base64_forms(secret.strip())
    for match in _SECRET_PARTS.finditer(secret):
        part = match.group(1)
        forms |= {part, part.strip(), quote(part, safe=""), quote_plus(part)} | _base64_forms(part)
    return {form for form in forms if len(form) >= MIN_SECRET}


class Scrubber:
    """Callable: `Scrubber(secrets)(text)` is the text with every secret masked as `***`."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        forms: set[str] = set()
        for secret in secrets:
            if isinstance(secret, str) and len(secret.strip()) >= MIN_SECRET:
                forms |= _variants(secret)
        # Longest first, so a secret that contains another is masked whole.
        self._forms = sorted(forms, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for form in self._forms:
            text = text.replace(form, MASK)
        text = _AUTH_HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
        text = _BEARER.sub(lambda m: f"{m.group(1)}{MASK}", text)
        text = _JWT.sub(MASK, text)
        text = _USERINFO.sub(lambda m: f"{m.group(1)}{MASK}@", text)
        return _SECRET_FIELDS.sub(lambda m: f"{m.group(1)}={MASK}", text)


# -- the secrets of this run, registered where they are read -------------------------------------

_lock = threading.Lock()
_registered: set[str] = set()
_current = Scrubber()


def register(*secrets: object) -> None:
    """Remember secret values for `scrub` (settings' secret keys, kubeconfig credentials, plugin tokens)."""
    global _current
    fresh = {s for s in secrets if isinstance(s, str) and len(s.strip()) >= MIN_SECRET} - _registered
    if not fresh:
        return
    with _lock:
        _registered.update(fresh)
        _current = Scrubber(_registered)


def registered() -> frozenset[str]:
    return frozenset(_registered)


def forget() -> None:
    """Drop every registered secret (tests run many commands in one process)."""
    global _current
    with _lock:
        _registered.clear()
        _current = Scrubber()


def scrub(text: str, extra: Iterable[str] = ()) -> str:
    """`text` with every registered secret (and `extra`), in every form, and every secret-looking fragment masked."""
    extra = [s for s in extra if isinstance(s, str) and len(s.strip()) >= MIN_SECRET and s not in _registered]
    return (Scrubber([*_registered, *extra]) if extra else _current)(text)
