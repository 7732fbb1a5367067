"""`check_storage` against Azure Blob Storage: Azurite on 127.0.0.1, which verifies shared-key
signatures and SAS permissions, so wrong keys and missing permissions are real answers here."""

from __future__ import annotations

import pytest

from det_k8s.storage import Reason, Status, Step, check_storage
from tests.support.emulators import AZURITE_ACCOUNT, AZURITE_KEY, report_text, storage_settings

pytestmark = pytest.mark.emulator

WRONG_KEY = "V3JvbmdLZXlXcm9uZ0tleVdyb25nS2V5V3JvbmdLZXlXcm9uZ0tleVdyb25nS2V5V3Jvbmc="


def azure(container, **auth):
    return storage_settings(type="azure", container=container, **auth)


def steps(report):
    return {r.step: (r.status, r.reason) for r in report.steps}


def test_a_working_container_passes_and_keeps_no_probe(azurite):
    container = azurite.new_container()
    report = check_storage(azure(container, connection_string=azurite.connection_string()))
    assert report.ok, report.to_dict()
    assert report.location == f"{azurite.blob_endpoint}/{container}/"
    assert azurite.keys(container) == []
    assert AZURITE_KEY not in report_text(report)


def test_account_url_with_an_account_key_credential_works(azurite):
    container = azurite.new_container()
    report = check_storage(azure(container, account_url=azurite.blob_endpoint, credential=AZURITE_KEY))
    assert report.ok, report.to_dict()
    assert azurite.keys(container) == []


def test_a_missing_container_is_named_with_its_account(azurite):
    report = check_storage(azure("no-such-container", connection_string=azurite.connection_string()))
    assert steps(report)[Step.WRITE] == (Status.FAILED, Reason.NO_SUCH_BUCKET)
    assert report.result(Step.WRITE).message == (
        f"no such container 'no-such-container' in account {AZURITE_ACCOUNT}; "
        "create it or fix checkpointStorage.container")
    assert steps(report)[Step.DELETE] == (Status.SKIPPED, None)


def test_a_wrong_account_key_is_bad_credentials_and_never_shown(azurite):
    container = azurite.new_container()
    report = check_storage(azure(container, connection_string=azurite.connection_string(key=WRONG_KEY)))
    assert steps(report)[Step.WRITE] == (Status.FAILED, Reason.BAD_CREDENTIALS)
    message = report.result(Step.WRITE).message
    assert message.startswith(f"bad credentials: account {AZURITE_ACCOUNT} rejected")
    assert WRONG_KEY not in report_text(report)
    assert azurite.keys(container) == []


def test_a_sas_without_delete_permission_is_named_and_the_probe_reported(azurite):
    container = azurite.new_container()
    sas = azurite.sas(container, read=True, write=True, create=True, list=True)
    report = check_storage(azure(container, account_url=azurite.blob_endpoint, credential=sas))
    assert steps(report) == {Step.WRITE: (Status.OK, None), Step.READ: (Status.OK, None),
                             Step.LIST: (Status.OK, None), Step.DELETE: (Status.FAILED, Reason.ACCESS_DENIED)}
    assert "needs permission d (delete) on container" in report.result(Step.DELETE).message
    name = report.probe.removeprefix(f"{azurite.blob_endpoint}/{container}/")
    assert report.left_behind == report.probe and azurite.keys(container) == [name]
    signature = sas.split("sig=")[1].split("&")[0]
    assert signature not in report_text(report)
    azurite.service().get_container_client(container).delete_blob(name)


def test_a_sas_without_list_permission_still_deletes_the_probe(azurite):
    container = azurite.new_container()
    sas = azurite.sas(container, read=True, write=True, create=True, delete=True)
    report = check_storage(azure(container, account_url=azurite.blob_endpoint, credential=sas))
    assert steps(report)[Step.LIST] == (Status.FAILED, Reason.ACCESS_DENIED)
    assert steps(report)[Step.DELETE] == (Status.OK, None)
    assert azurite.keys(container) == []
    assert sas.split("sig=")[1].split("&")[0] not in report_text(report)


def test_an_unreachable_endpoint_is_named(azurite, closed_port):
    report = check_storage(azure("ckpt", connection_string=azurite.connection_string(port=closed_port)))
    assert steps(report)[Step.WRITE] == (Status.FAILED, Reason.UNREACHABLE)
    assert report.result(Step.WRITE).message.startswith(
        f"endpoint http://127.0.0.1:{closed_port}/{AZURITE_ACCOUNT} unreachable (connection refused); check ")


def test_a_silent_endpoint_times_out_once_per_call_and_the_probe_is_named(azurite, tarpit):
    settings = azure("ckpt", connection_string=azurite.connection_string(port=tarpit.port))
    report = check_storage(settings, timeout=0.5)
    assert steps(report)[Step.WRITE] == (Status.FAILED, Reason.TIMEOUT)
    assert steps(report)[Step.DELETE] == (Status.FAILED, Reason.TIMEOUT)
    assert report.left_behind == report.probe
    assert tarpit.connections == 2  # one write, one delete: retry_total=0


def test_a_malformed_connection_string_names_the_setting_not_its_value():
    secret = "AccountKey=c2VjcmV0LXZhbHVlLWhlcmU="
    report = check_storage(azure("ckpt", connection_string=f"this is not one;{secret}"))
    assert steps(report)[Step.WRITE] == (Status.FAILED, Reason.BAD_CREDENTIALS)
    assert report.result(Step.WRITE).message.startswith("checkpointStorage.connection_string is not usable")
    assert "c2VjcmV0LXZhbHVlLWhlcmU=" not in report_text(report)
