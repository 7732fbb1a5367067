"""Google Cloud Storage through google-cloud-storage, for the probe.

The SDK is imported inside the methods. Credentials are the application default credentials, and
`STORAGE_EMULATOR_HOST` is honoured exactly as the SDK honours it (it then talks to the emulator
without credentials), because `storage.Client` is left to decide both. Every call passes
`timeout=` and `retry=None`: the SDK's default retry would keep a dead endpoint busy for two
minutes; the SDK's background bucket-metadata fetch is switched off for the same reason.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .netcause import first_line, never_connected, public_url, unreachable
from .report import Failure, Reason, Step

if TYPE_CHECKING:
    from ..settings import CheckpointStorage

PERMISSION = {Step.WRITE: "storage.objects.create", Step.READ: "storage.objects.get",
              Step.LIST: "storage.objects.list", Step.DELETE: "storage.objects.delete"}
DEFAULT_ENDPOINT = "https://storage.googleapis.com"


def _emulator() -> str | None:
    return os.environ.get("STORAGE_EMULATOR_HOST") or None


class GCSBackend:
    def __init__(self, storage: CheckpointStorage, *, timeout: float, directory: str) -> None:
        assert storage.bucket, "validated settings have a bucket"
        self.bucket_name = storage.bucket
        self.directory = directory
        self.timeout = timeout
        self._client: Any = None

    @property
    def endpoint(self) -> str:
        emulator = _emulator()
        return public_url(emulator) if emulator else DEFAULT_ENDPOINT

    @property
    def location(self) -> str:
        return f"gs://{self.bucket_name}/{self.directory + '/' if self.directory else ''}"

    def url(self, key: str) -> str:
        return f"gs://{self.bucket_name}/{key}"

    def _bucket(self) -> Any:
        if self._client is None:
            from google.cloud import storage

            client = storage.Client(project=None)  # bucket and object calls need no project
            # google-cloud-storage 3.x fetches bucket metadata for tracing in a background thread
            # on the first call, even with tracing off: one more request, needing
            # storage.buckets.get, retried for up to two minutes against a dead endpoint. Every
            # use of the cache is guarded by `client._bucket_metadata_cache` being truthy.
            client._bucket_metadata_cache = None
            self._client = client
        return self._client.bucket(self.bucket_name)

    def _limits(self) -> dict[str, Any]:
        return {"timeout": (self.timeout, self.timeout), "retry": None}

    def write(self, key: str, data: bytes) -> None:
        blob = self._bucket().blob(key)
        blob.upload_from_string(data, content_type="application/octet-stream", **self._limits())

    def read(self, key: str) -> bytes:
        return bytes(self._bucket().blob(key).download_as_bytes(**self._limits()))

    def list(self, prefix: str) -> Iterable[str]:
        bucket = self._bucket()
        return [blob.name for blob in self._client.list_blobs(bucket, prefix=prefix, max_results=100,
                                                               **self._limits())]

    def delete(self, key: str) -> None:
        from google.api_core.exceptions import NotFound

        try:
            self._bucket().blob(key).delete(**self._limits())
        except NotFound as exc:
            if _bucket_missing(exc):
                raise
            # The object is already absent, which is what delete is for (see Backend.delete).

    def explain(self, exc: Exception, step: Step) -> Failure:
        from google.api_core import exceptions as gx

        failure = self._classify(exc, step)
        code = exc.code if isinstance(exc, gx.GoogleAPICallError) else None
        return replace(failure, refused=isinstance(code, int) and 400 <= code < 500)

    def _classify(self, exc: Exception, step: Step) -> Failure:
        import requests
        from google.api_core import exceptions as gx
        from google.auth import exceptions as ax

        setting = "STORAGE_EMULATOR_HOST" if _emulator() else "network access to storage.googleapis.com"
        if isinstance(exc, gx.NotFound):
            if step in (Step.WRITE, Step.LIST) or _bucket_missing(exc):
                return Failure(Reason.NO_SUCH_BUCKET,
                               f"no such bucket '{self.bucket_name}' at {self.endpoint}; "
                               "create it or fix checkpointStorage.bucket")
            return Failure(Reason.OTHER, "the probe object written a moment ago is not there (404)")
        if isinstance(exc, gx.Unauthorized):
            return Failure(Reason.BAD_CREDENTIALS, "bad credentials: GCS rejected the application default "
                                                   f"credentials (401: {first_line(exc.message)})")
        if isinstance(exc, gx.Forbidden):
            return Failure(Reason.ACCESS_DENIED,
                           f"access denied: the credentials need {PERMISSION[step]} on "
                           f"gs://{self.bucket_name} (roles/storage.objectAdmin has all four); "
                           f"GCS said: {first_line(exc.message)}")
        if isinstance(exc, gx.GoogleAPICallError):
            return Failure(Reason.OTHER, f"GCS error {exc.code}: {first_line(exc.message)}")
        if isinstance(exc, ax.DefaultCredentialsError):
            return Failure(Reason.BAD_CREDENTIALS, "no application default credentials: set "
                                                   "GOOGLE_APPLICATION_CREDENTIALS or run `gcloud auth "
                                                   "application-default login`")
        if isinstance(exc, ax.RefreshError | ax.TransportError):
            return Failure(Reason.BAD_CREDENTIALS,
                           "bad credentials: the application default credentials could not be refreshed "
                           f"({first_line(str(exc))})")
        if isinstance(exc, requests.exceptions.ReadTimeout):
            return Failure(Reason.TIMEOUT, f"no answer from {self.endpoint} within {self.timeout:g}s")
        if isinstance(exc, requests.exceptions.ConnectionError) and never_connected(exc):
            return Failure(Reason.UNREACHABLE, unreachable(self.endpoint, exc, self.timeout, setting))
        if isinstance(exc, requests.exceptions.RequestException):
            return Failure(Reason.OTHER, f"the connection to {self.endpoint} broke: {first_line(str(exc))}")
        if type(exc).__name__ == "DataCorruption":  # google.resumable_media: the checksum did not match
            return Failure(Reason.MISMATCH, f"the object read back is corrupt: {first_line(str(exc))}")
        return Failure(Reason.OTHER, f"{type(exc).__name__}: {first_line(str(exc))}")


def _bucket_missing(exc: Exception) -> bool:
    """GCS says "The specified bucket does not exist." for a bucket, "No such object: ..." for an object."""
    return "bucket does not exist" in str(exc).lower()
