"""Azure Blob Storage through azure-storage-blob, for the probe.

The SDK is imported inside the methods. The client is built as Determined builds it: from
`connection_string`, or from `account_url` with the optional `credential` (an account key or a SAS
token; a SAS may also sit in the URL's query). Every call has connect and read time limits and
`retry_total=0`, so a dead endpoint fails in seconds instead of retrying for a minute.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .netcause import first_line, never_connected, public_url, unreachable
from .report import Failure, Reason, Step

if TYPE_CHECKING:
    from ..settings import CheckpointStorage

SAS_PERMISSION = {Step.WRITE: "w (write)", Step.READ: "r (read)", Step.LIST: "l (list)",
                  Step.DELETE: "d (delete)"}
_BAD_AUTH = {"AuthenticationFailed", "InvalidAuthenticationInfo", "NoAuthenticationInformation"}
_DENIED = {"AuthorizationFailure", "AuthorizationPermissionMismatch", "AuthorizationResourceTypeMismatch",
           "AuthorizationServiceMismatch", "AuthorizationSourceIPMismatch", "AuthorizationProtocolMismatch",
           "InsufficientAccountPermissions", "AccountIsDisabled"}


class MalformedSetting(Exception):
    """The SDK refused to build a client from the settings (a malformed connection string or URL)."""


def parse_connection_string(text: str) -> dict[str, str]:
    """`A=b;C=d=` as a case-insensitive dict (keys lower-cased); values keep their `=`."""
    fields: dict[str, str] = {}
    for part in text.split(";"):
        name, sep, value = part.partition("=")
        if sep:
            fields[name.strip().lower()] = value.strip()
    return fields


def endpoint_and_account(storage: CheckpointStorage) -> tuple[str, str | None]:
    """The blob endpoint (no secrets) and the account name, from the settings alone."""
    if storage.connection_string:
        fields = parse_connection_string(storage.connection_string)
        if fields.get("usedevelopmentstorage", "").lower() == "true":
            return "http://127.0.0.1:10000/devstoreaccount1", "devstoreaccount1"
        account = fields.get("accountname")
        if fields.get("blobendpoint"):
            return public_url(fields["blobendpoint"]).rstrip("/"), account
        protocol = fields.get("defaultendpointsprotocol", "https")
        suffix = fields.get("endpointsuffix", "core.windows.net")
        return f"{protocol}://{account or '?'}.blob.{suffix}", account
    url = storage.account_url or ""
    return public_url(url).rstrip("/"), _account_from_url(url)


def _account_from_url(url: str) -> str | None:
    """`https://acct.blob.core.windows.net` -> acct; Azurite's `http://127.0.0.1:10000/acct` -> acct."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        ipaddress.ip_address(host)
        is_ip = True
    except ValueError:
        is_ip = host == "localhost"
    if is_ip:
        segment = parts.path.strip("/").split("/")[0]
        return segment or None
    return host.split(".")[0] or None


class AzureBackend:
    def __init__(self, storage: CheckpointStorage, *, timeout: float) -> None:
        assert storage.container, "validated settings have a container"
        self.container = storage.container
        self.timeout = timeout
        self._storage = storage
        self.endpoint, self.account = endpoint_and_account(storage)
        self._client: Any = None

    @property
    def location(self) -> str:
        return f"{self.endpoint}/{self.container}/"

    def url(self, key: str) -> str:
        return f"{self.endpoint}/{self.container}/{key}"

    def client(self) -> Any:
        if self._client is None:
            from azure.storage.blob import BlobServiceClient

            limits: dict[str, Any] = {"connection_timeout": self.timeout, "read_timeout": self.timeout,
                                      "retry_total": 0}
            storage = self._storage
            try:
                if storage.connection_string:
                    service = BlobServiceClient.from_connection_string(storage.connection_string, **limits)
                else:
                    service = BlobServiceClient(storage.account_url or "", credential=storage.credential,
                                                **limits)
            except ValueError as exc:
                raise MalformedSetting(str(exc)) from exc
            self.account = service.account_name or self.account
            self._client = service.get_container_client(self.container)
        return self._client

    def write(self, key: str, data: bytes) -> None:
        self.client().upload_blob(key, data, overwrite=False)

    def read(self, key: str) -> bytes:
        return bytes(self.client().download_blob(key).readall())

    def list(self, prefix: str) -> Iterable[str]:
        return [blob.name for blob in self.client().list_blobs(name_starts_with=prefix, results_per_page=100)]

    def delete(self, key: str) -> None:
        from azure.core.exceptions import ResourceNotFoundError

        try:
            self.client().delete_blob(key)
        except ResourceNotFoundError as exc:
            if _code(exc) != "BlobNotFound":
                raise
            # The blob is already absent, which is what delete is for (see Backend.delete).

    def _endpoint_setting(self) -> str:
        """Which setting decides where requests go, for "unreachable" messages."""
        if not self._storage.connection_string:
            return "checkpointStorage.account_url"
        if "blobendpoint" in parse_connection_string(self._storage.connection_string):
            return "BlobEndpoint in checkpointStorage.connection_string"
        return "AccountName and EndpointSuffix in checkpointStorage.connection_string"

    def _credential_setting(self) -> str:
        if self._storage.connection_string:
            return "the AccountKey or SharedAccessSignature in checkpointStorage.connection_string"
        return "checkpointStorage.credential" + ("" if self._storage.credential else " (not set)")

    def explain(self, exc: Exception, step: Step) -> Failure:
        from azure.core import exceptions as ax

        setting = self._endpoint_setting()
        if isinstance(exc, MalformedSetting):
            which = "connection_string" if self._storage.connection_string else "account_url"
            return Failure(Reason.BAD_CREDENTIALS,
                           f"checkpointStorage.{which} is not usable: {first_line(str(exc))}")
        if isinstance(exc, ax.ClientAuthenticationError) and exc.status_code is None:  # signing failed here
            return Failure(Reason.BAD_CREDENTIALS,
                           f"bad credentials: requests could not be signed ({first_line(str(exc))}); "
                           f"check {self._credential_setting()}")
        if isinstance(exc, ax.HttpResponseError):
            status = exc.status_code or 0
            return replace(self._explain_answer(exc, step), refused=400 <= status < 500)
        if isinstance(exc, ax.ServiceRequestError) or never_connected(exc):  # nothing was sent
            return Failure(Reason.UNREACHABLE, unreachable(self.endpoint, exc, self.timeout, setting))
        if isinstance(exc, ax.ServiceResponseError):
            if "timed out" in str(exc).lower() or "timeout" in type(exc.inner_exception).__name__.lower():
                return Failure(Reason.TIMEOUT, f"no answer from {self.endpoint} within {self.timeout:g}s")
            return Failure(Reason.OTHER, f"the connection to {self.endpoint} broke: {first_line(str(exc))}")
        return Failure(Reason.OTHER, f"{type(exc).__name__}: {first_line(str(exc))}")

    def _explain_answer(self, exc: Any, step: Step) -> Failure:
        """The service answered with an error status and code."""
        code, status = _code(exc), exc.status_code
        account = self.account or "?"
        if code == "ContainerNotFound":
            return Failure(Reason.NO_SUCH_BUCKET,
                           f"no such container '{self.container}' in account {account}; "
                           "create it or fix checkpointStorage.container")
        if code == "BlobNotFound":
            return Failure(Reason.OTHER, "the probe blob written a moment ago is not there (BlobNotFound)")
        if code in _BAD_AUTH or status == 401 or "failed to authenticate" in str(exc).lower():
            return Failure(Reason.BAD_CREDENTIALS,
                           f"bad credentials: account {account} rejected the request ({code or status}); "
                           f"check {self._credential_setting()}")
        if code in _DENIED or status == 403:
            return Failure(Reason.ACCESS_DENIED,
                           f"access denied ({code or status}): the credential needs permission "
                           f"{SAS_PERMISSION[step]} on container '{self.container}' in account {account} "
                           "(a SAS with it, or the Storage Blob Data Contributor role)")
        return Failure(Reason.OTHER, f"Azure error {code or status}: {first_line(exc.message or str(exc))}")


def _code(exc: Any) -> str:
    """The service's error code as text (azure-storage-blob gives a StorageErrorCode enum or a string)."""
    code = getattr(exc, "error_code", None)
    return str(getattr(code, "value", code) or "")
