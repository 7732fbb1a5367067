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

A form shorter than `WHOLE_TOKEN_BELOW` characters is masked only as a whole token (a hyphen joins words), so
a short password never masks the words that contain it; a short secret that the settings' non-secret values
also hold as a word (`accessKey: minio` beside `endpointUrl: http://minio:9000`, see `register_plain`) only where
it is a secret-looking field's value, so `minio:9000` in an endpoint error stays readable.

Known secrets are registered once, where they are read (`register`), and `scrub` applies them to
every line `cli/output.py` prints and to every tool's stderr (`tools/process.py`), so a path that
forgets to scrub cannot exist. (Which settings keys are secret, and masking them while a message about
settings is composed, is `settings/secret_settings.py`.)
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
# A form shorter than this is masked only as a whole token (not inside a longer word): a 4-character password
# `test` must not turn `latest` into `la***` nor `det` turn `det-k8s` into `***-k8s`, which would print the
# secret's letters around every mask. Longer forms (and the middles of base64 encodings) match anywhere.
WHOLE_TOKEN_BELOW = 12

# key=value fragments whose value is secret: connection strings (`;`-separated), query strings
# (`&`-separated) and SigV4 headers (`,`-separated).
_SECRET_FIELDS = re.compile(
    r"(?i)\b(AccountKey|SharedAccessSignature|sig|X-Amz-Signature|X-Amz-Credential|X-Amz-Security-Token"
    r"|Signature|Credential|AWSAccessKeyId|access_token|refresh_token|id_token|client_secret|password|passwd|pwd"
    r"|token|apikey|api_key)=([^;&,\s'\"<>]+?)(?=\)?(?:[;&,\s'\"<>]|$))"  # a closing parenthesis after it stays
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
    """The secret base64-encoded: whole (as a Secret's data holds it) and its middles (`_base64_middles`)."""
    raw = secret.encode("utf-8")
    whole = {encode(raw).decode("ascii") for encode in (base64.b64encode, base64.urlsafe_b64encode)}
    return whole | _base64_middles(secret)


def _base64_middles(secret: str) -> set[str]:
    """For each of the three alignments the secret can have inside a longer encoded text, the characters of
    its encoding that depend on it alone."""
    raw = secret.encode("utf-8")
    forms: set[str] = set()
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        for offset in range(3):
            encoded = encode(b"\0" * offset + raw).decode("ascii").rstrip("=")
            start = -(-offset * 8 // 6)  # the first character holding no bit of the padding in front
            end = (offset + len(raw)) * 8 // 6  # the last character holding only bits of the secret
            core = encoded[start:end]
            if len(core) >= MIN_ENCODED:
                forms.add(core)
    return forms


def _encoded_middles(secret: str) -> set[str]:
    """Every base64 middle `_variants` holds for this secret (they match anywhere, never as whole tokens)."""
    out = _base64_middles(secret) | _base64_middles(secret.strip())
    for match in _SECRET_PARTS.finditer(secret):
        out |= _base64_middles(match.group(1))
    return out


def _whole_token(form: str) -> re.Pattern[str] | None:
    """How a short form is found: not preceded or followed by a word character where its own edge is one."""
    if len(form) >= WHOLE_TOKEN_BELOW:
        return None
    before = r"(?<![\w-])" if re.match(r"\w", form[0]) else ""  # a hyphen joins words in names: det-k8s
    after = r"(?![\w-])" if re.match(r"\w", form[-1]) else ""
    return re.compile(before + re.escape(form) + after)


def replace_secret(text: str, secret: str, replacement: str) -> str:
    """`text` with each occurrence of `secret` as written replaced (a short one only as a whole token)."""
    pattern = _whole_token(secret)
    return text.replace(secret, replacement) if pattern is None else pattern.sub(lambda _: replacement, text)


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


# A short secret that the run's other, non-secret text also holds as a word (an S3 `accessKey: minio` beside
# `endpointUrl: http://minio:9000`) names hosts, users and products in the same messages: it is masked only where
# it stands as the value of a secret-looking field (`accessKey: minio`, `access_key=minio`, `"secretKey": "minio"`,
# `--set checkpointStorage.accessKey=minio`), so `minio:9000` in an endpoint error stays readable.
_FIELD_NAME = (r"(?i:[\w.-]*(?:key|secret|pass|pwd|token|cred|auth|sig|conn|user|account|login)[\w.-]*)"
               r"['\"]?\s*[:=]\s*['\"]?")


def common_word(secret: str, plain: Iterable[str]) -> bool:
    """A short secret that the non-secret `plain` texts (settings values) also hold as a whole token."""
    pattern = _whole_token(secret.strip())
    return pattern is not None and any(pattern.search(text) for text in plain)


class Scrubber:
    """Callable: `Scrubber(secrets)(text)` is the text with every secret masked as `***`."""

    def __init__(self, secrets: Iterable[str] = (), plain: Iterable[str] = ()) -> None:
        plain = [text for text in plain if isinstance(text, str)]
        forms: set[str] = set()
        words: set[str] = set()  # forms of short common-word secrets: masked as a field's value only
        cores: set[str] = set()  # middles of base64 encodings: inside longer encoded text by nature
        for secret in secrets:
            if isinstance(secret, str) and len(secret.strip()) >= MIN_SECRET:
                if common_word(secret, plain):
                    words |= _variants(secret) - _encoded_middles(secret)
                else:
                    forms |= _variants(secret)
                    cores |= _encoded_middles(secret)
        words -= forms
        # Longest first, so a secret that contains another is masked whole.
        self._forms = [(form, None if form in cores else _whole_token(form))
                       for form in sorted(forms, key=len, reverse=True)]
        self._words = re.compile(f"({_FIELD_NAME})(?:" + "|".join(
            re.escape(w) for w in sorted(words, key=len, reverse=True)) + r")(?![\w-])") if words else None

    def __call__(self, text: str) -> str:
        for form, pattern in self._forms:
            text = text.replace(form, MASK) if pattern is None else pattern.sub(MASK, text)
        if self._words is not None:
            text = self._words.sub(lambda m: f"{m.group(1)}{MASK}", text)
        text = _AUTH_HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
        text = _BEARER.sub(lambda m: f"{m.group(1)}{MASK}", text)
        text = _JWT.sub(MASK, text)
        text = _USERINFO.sub(lambda m: f"{m.group(1)}{MASK}@", text)
        return _SECRET_FIELDS.sub(lambda m: f"{m.group(1)}={MASK}", text)


# -- the secrets of this run, registered where they are read -------------------------------------

_lock = threading.Lock()
_registered: set[str] = set()
_plain: set[str] = set()
_current = Scrubber()


def register(*secrets: object) -> None:
    """Remember secret values for `scrub` (settings' secret keys, kubeconfig credentials, plugin tokens)."""
    global _current
    fresh = {s for s in secrets if isinstance(s, str) and len(s.strip()) >= MIN_SECRET} - _registered
    if not fresh:
        return
    with _lock:
        _registered.update(fresh)
        _current = Scrubber(_registered, _plain)


def register_plain(*texts: object) -> None:
    """Remember the non-secret values read beside the secrets (settings values): a short secret they also hold as
    a word (a host `minio`) is masked only as a secret field's value, not wherever that word appears."""
    global _current
    fresh = {t for t in texts if isinstance(t, str) and t} - _plain
    if not fresh:
        return
    with _lock:
        _plain.update(fresh)
        _current = Scrubber(_registered, _plain)


def registered() -> frozenset[str]:
    return frozenset(_registered)


def forget() -> None:
    """Drop every registered secret (tests run many commands in one process)."""
    global _current
    with _lock:
        _registered.clear()
        _plain.clear()
        _current = Scrubber()


def scrub(text: str, extra: Iterable[str] = (), *, own_words: bool = False) -> str:
    """`text` with every registered secret (and `extra`), in every form, and every secret-looking fragment masked.

    `own_words`: the text was made without the secrets (install --dry-run's manifests, rendered with placeholders in
    every secret's place), so a short secret it holds as a whole word is that word by coincidence (a password
    `postgres` beside `image: postgres:10.14`, the database user `postgres`) and is left as it is: masking it would
    break the text (`***` is a YAML alias) and spell out the password. A long secret is still masked anywhere, and
    secret-looking fragments are."""
    extra = [s for s in extra if isinstance(s, str) and len(s.strip()) >= MIN_SECRET and s not in _registered]
    if own_words:
        kept = [s for s in [*_registered, *extra] if not common_word(s, [text])]
        return Scrubber(kept, _plain)(text)
    return (Scrubber([*_registered, *extra], _plain) if extra else _current)(text)
