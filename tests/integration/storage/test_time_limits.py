"""A host that never answers the connection fails each backend within its time limit, once.

`tarpit` tests (connected, then silence) are with each backend; this is the firewalled host: no
connection is ever made, so nothing can have been written and the delete is skipped.
"""

from __future__ import annotations

import pytest

from det_k8s.storage import Reason, Status, Step, check_storage
from tests.support.emulators import AZURITE_KEY, storage_settings

pytestmark = pytest.mark.emulator


def settings_for(backend, url, monkeypatch):
    if backend == "s3":
        return storage_settings(type="s3", bucket="ckpt", endpointUrl=url, accessKey="AKIAX",
                                secretKey="sk-0")
    if backend == "gcs":
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", url)
        return storage_settings(type="gcs", bucket="ckpt")
    return storage_settings(type="azure", container="ckpt", connection_string=(
        f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={AZURITE_KEY};"
        f"BlobEndpoint={url}/devstoreaccount1;"))


@pytest.mark.parametrize("backend", ["s3", "gcs", "azure"])
def test_a_firewalled_endpoint_is_unreachable_within_the_limit(backend, blackhole, monkeypatch):
    url = f"http://127.0.0.1:{blackhole}"
    report = check_storage(settings_for(backend, url, monkeypatch), timeout=0.5)
    write = report.result(Step.WRITE)
    assert (write.status, write.reason) == (Status.FAILED, Reason.UNREACHABLE)
    assert write.message.startswith(f"endpoint {url}") and "(no connection within 0.5s)" in write.message
    assert report.result(Step.DELETE).status is Status.SKIPPED
