"""The scrubber masks secrets in every form SDK messages quote them in.

Real SDK failures that carry secrets are in tests/integration/storage (botocore quoting an
Authorization header); these are the forms, one by one.
"""

from __future__ import annotations

import pytest

from det_k8s.scrub_output import MASK, Scrubber

KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
CONN = f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={KEY};EndpointSuffix=core.windows.net"


def test_each_secret_is_masked_wherever_it_appears():
    scrub = Scrubber(["wJalrXUtnFEMI/K7MDENG", "AKIAIOSFODNN7EXAMPLE"])
    text = "key AKIAIOSFODNN7EXAMPLE with secret wJalrXUtnFEMI/K7MDENG failed (AKIAIOSFODNN7EXAMPLE)"
    assert scrub(text) == f"key {MASK} with secret {MASK} failed ({MASK})"


def test_a_secret_is_masked_stripped_escaped_and_url_encoded():
    scrub = Scrubber(["AKIAEXAMPLE\n", "a+b/c="])
    assert "AKIAEXAMPLE" not in scrub("Credential=x b'AKIAEXAMPLE\\n/2026' and AKIAEXAMPLE alone")
    assert scrub("q=a%2Bb%2Fc%3D and a+b/c= and a%2Bb%2Fc%3D") == f"q={MASK} and {MASK} and {MASK}"


def test_the_account_key_inside_a_connection_string_is_masked_on_its_own():
    scrub = Scrubber([CONN])
    assert scrub(f"the key {KEY} was rejected") == f"the key {MASK} was rejected"
    assert KEY not in scrub(CONN) and "AccountName" not in scrub(CONN)


@pytest.mark.parametrize(("text", "secret_part"), [
    (f"AccountName=a;AccountKey={KEY};EndpointSuffix=x", KEY),
    ("BlobEndpoint=x;SharedAccessSignature=sv=2021&sig=abcDEF%2B123", "abcDEF"),
    ("GET https://a.blob.core.windows.net/c/b?sv=2021-08-06&se=2030&sp=rwdl&sig=Zm9vYmFy%3D", "Zm9vYmFy"),
    ("https://b.s3.amazonaws.com/k?X-Amz-Credential=AKIA%2F2026&X-Amz-Signature=deadbeef01", "deadbeef01"),
    ("https://b.s3.amazonaws.com/k?X-Amz-Credential=AKIAXYZ%2F2026&X-Amz-Date=1", "AKIAXYZ"),
    ("Authorization: AWS4-HMAC-SHA256 Credential=AKIAQQQ/2026/s3/aws4_request, Signature=abc", "AKIAQQQ"),
    ("{'Authorization': 'SharedKey devstoreaccount1:c2lnbmF0dXJl', 'x-ms-date': 'now'}", "c2lnbmF0dXJl"),
    ("Invalid header value b'AWS4-HMAC-SHA256 Credential=AKIAZZZ\\n/2026, Signature=0123abcd'", "0123abcd"),
    ("headers: authorization=Bearer ya29.token-value", "ya29.token-value"),
    ('Could not connect to the endpoint URL: "http://admin:pw-in-url@minio:9000/b/k"', "pw-in-url"),
])
def test_secret_looking_fragments_are_masked_whatever_their_origin(text, secret_part):
    scrubbed = Scrubber()(text)
    assert secret_part not in scrubbed and MASK in scrubbed


def test_ordinary_words_survive():
    text = ("The request signature we calculated does not match the signature you provided "
            "(SignatureDoesNotMatch); check the Authorization header format")
    assert Scrubber(["unrelated-secret"])(text) == text


def test_a_secret_containing_another_is_masked_whole():
    scrub = Scrubber(["abc", "abcdef-long"])
    assert scrub("x abcdef-long y abc") == f"x {MASK} y {MASK}"


@pytest.mark.parametrize("secret", ["det", "test", "ster", "pässw"])
def test_a_short_secret_is_masked_as_a_whole_token_not_inside_words(secret):
    scrub = Scrubber([secret])
    words = "/tmp/det-k8s-x1 determined latest cluster tester pässwort"
    assert scrub(words) == words  # masking inside words would print the secret's letters around each mask
    for text in (f"password {secret}", f"postgres://u:{secret}@db:5432", f'"{secret}"', f"{secret}."):
        assert secret not in scrub(text), text


def test_a_short_secrets_base64_is_still_masked_inside_longer_encodings():
    import base64

    scrub = Scrubber(["abcdefgh"])
    encoded = base64.b64encode(b"prefix:abcdefgh:suffix").decode()
    assert scrub(encoded) != encoded and base64.b64encode(b"abcdefgh").decode() not in scrub(f"v: {encoded}")
