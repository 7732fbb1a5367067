"""Remove secrets from text built from SDK exceptions before it reaches a user.

SDK messages are not written with secrecy in mind: botocore quotes a whole Authorization header
(access key and signature) when a key holds a line break, Azure errors can echo a request URL with
its SAS signature, and a connection string may turn up anywhere. So every message from an SDK goes
through `Scrubber`, which removes

- each secret the settings hold, also in the forms it takes inside messages: stripped of
  whitespace, backslash-escaped as `repr` shows it, and URL-encoded;
- the parts of a connection string or SAS token that are secret (`AccountKey`, `sig`), even when the
  settings hold the whole string and the message quotes only the part;
- secret-looking fragments whatever their origin: `AccountKey=`, `SharedAccessSignature=`, `sig=`,
  `X-Amz-Signature=`, `X-Amz-Credential=`, `X-Amz-Security-Token=`, `Signature=`, `Credential=`,
  `Authorization` header values, and the `user:password@` of URLs (botocore quotes an `endpointUrl`
  whole).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import quote, quote_plus

MASK = "***"

# key=value fragments whose value is secret: connection strings (`;`-separated), query strings
# (`&`-separated) and SigV4 headers (`,`-separated).
_SECRET_FIELDS = re.compile(
    r"(?i)\b(AccountKey|SharedAccessSignature|sig|X-Amz-Signature|X-Amz-Credential|X-Amz-Security-Token"
    r"|Signature|Credential|AWSAccessKeyId|access_token)=([^;&,\s'\"<>]+)"
)
# An Authorization header, as `Authorization: value`, `'Authorization': 'value'` or `Authorization=value`.
_AUTH_HEADER = re.compile(r"(?i)(['\"]?(?:proxy-)?authorization['\"]?\s*[:=]\s*)(['\"]?)([^'\"\r\n]+)")
# user:password@ in a URL.
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@'\"]+@")
# The part of a connection string or SAS token that is secret on its own.
_SECRET_PARTS = re.compile(r"(?i)(?:^|[;&?])(?:AccountKey|SharedAccessSignature|sig)=([^;&]+)")


def _variants(secret: str) -> set[str]:
    """The forms a secret takes inside messages."""
    forms = {secret, secret.strip()}
    escaped = secret.encode("unicode_escape").decode("ascii")
    forms |= {escaped, escaped.replace("\\", "\\\\"), quote(secret, safe=""), quote_plus(secret)}
    for match in _SECRET_PARTS.finditer(secret):
        part = match.group(1)
        forms |= {part, part.strip(), quote(part, safe=""), quote_plus(part)}
    return {form for form in forms if form}


class Scrubber:
    """Callable: `Scrubber(secrets)(text)` is the text with every secret masked as `***`."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        forms: set[str] = set()
        for secret in secrets:
            if secret:
                forms |= _variants(secret)
        # Longest first, so a secret that contains another is masked whole.
        self._forms = sorted(forms, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for form in self._forms:
            text = text.replace(form, MASK)
        text = _AUTH_HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
        text = _USERINFO.sub(lambda m: f"{m.group(1)}{MASK}@", text)
        return _SECRET_FIELDS.sub(lambda m: f"{m.group(1)}={MASK}", text)
