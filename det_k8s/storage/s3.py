"""Amazon S3 and S3 clones (MinIO, Ceph...) through boto3, for the probe.

boto3 is imported inside the methods (it costs ~300 ms and most commands never need it). The
client makes one attempt per call, no retries, with connect and read time limits, so a dead
endpoint fails in seconds. Without accessKey/secretKey the SDK's default credential chain is used
(environment, ~/.aws, instance or pod role), as it is in Determined's pods.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .netcause import first_line, never_connected, public_url, unreachable
from .report import Failure, Reason, Step

if TYPE_CHECKING:
    from ..settings import CheckpointStorage

PERMISSION = {Step.WRITE: "s3:PutObject", Step.READ: "s3:GetObject", Step.LIST: "s3:ListBucket",
              Step.DELETE: "s3:DeleteObject"}
_BAD_KEY = {"InvalidAccessKeyId", "InvalidClientTokenId", "UnrecognizedClientException"}
_BAD_SECRET = {"SignatureDoesNotMatch"}
_BAD_TOKEN = {"ExpiredToken", "ExpiredTokenException", "InvalidToken", "TokenRefreshRequired"}
_DENIED = {"AccessDenied", "AllAccessDisabled", "AccountProblem", "InvalidObjectState"}
_WRONG_REGION = {"PermanentRedirect", "AuthorizationHeaderMalformed", "IllegalLocationConstraintException"}


class S3Backend:
    def __init__(self, storage: CheckpointStorage, *, timeout: float, directory: str) -> None:
        assert storage.bucket, "validated settings have a bucket"
        self.bucket = storage.bucket
        self.directory = directory  # the prefix as a directory: "" or "research"
        self.timeout = timeout
        self._storage = storage
        self._client: Any = None

    @property
    def endpoint(self) -> str:
        if self._storage.endpoint_url:
            return public_url(self._storage.endpoint_url)
        if self._client is not None:
            return str(self._client.meta.endpoint_url)
        return "https://s3.amazonaws.com"

    @property
    def location(self) -> str:
        return f"s3://{self.bucket}/{self.directory + '/' if self.directory else ''}"

    def url(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    def client(self) -> Any:
        if self._client is None:
            import boto3
            from botocore.config import Config

            session = boto3.session.Session(aws_access_key_id=self._storage.access_key,
                                            aws_secret_access_key=self._storage.secret_key)
            config = Config(connect_timeout=self.timeout, read_timeout=self.timeout,
                            retries={"total_max_attempts": 1, "mode": "standard"})
            self._client = session.client("s3", endpoint_url=self._storage.endpoint_url or None,
                                          config=config)
        return self._client

    def write(self, key: str, data: bytes) -> None:
        self.client().put_object(Bucket=self.bucket, Key=key, Body=data)

    def read(self, key: str) -> bytes:
        body = self.client().get_object(Bucket=self.bucket, Key=key)["Body"]
        try:
            return bytes(body.read())
        finally:
            body.close()

    def list(self, prefix: str) -> Iterable[str]:
        answer = self.client().list_objects_v2(Bucket=self.bucket, Prefix=prefix, MaxKeys=100)
        return [item["Key"] for item in answer.get("Contents", [])]

    def delete(self, key: str) -> None:
        self.client().delete_object(Bucket=self.bucket, Key=key)  # succeeds when the key is absent

    def _resource(self, step: Step) -> str:
        if step is Step.LIST:
            scope = f" (for prefix {self.directory}/)" if self.directory else ""
            return f"arn:aws:s3:::{self.bucket}{scope}"
        return f"arn:aws:s3:::{self.bucket}/{self.directory + '/' if self.directory else ''}*"

    def explain(self, exc: Exception, step: Step) -> Failure:
        from botocore import exceptions as bx

        setting = "checkpointStorage.endpointUrl" if self._storage.endpoint_url else "network access to S3"
        if isinstance(exc, bx.ClientError):
            failure = self._explain_answer(exc.response, step)
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
            return replace(failure, refused=400 <= status < 500)
        if isinstance(exc, ValueError) and "Invalid endpoint" in str(exc):  # from building the client
            return Failure(Reason.OTHER, f"checkpointStorage.endpointUrl {self.endpoint} is not a usable URL",
                           refused=True)
        if isinstance(exc, bx.NoCredentialsError | bx.PartialCredentialsError | bx.CredentialRetrievalError):
            return Failure(Reason.BAD_CREDENTIALS,
                           "no AWS credentials: set checkpointStorage.accessKey and secretKey, or give this "
                           f"machine credentials (AWS_PROFILE, ~/.aws) ({first_line(str(exc))})")
        if isinstance(exc, bx.ReadTimeoutError):
            return Failure(Reason.TIMEOUT, f"no answer from {self.endpoint} within {self.timeout:g}s")
        if isinstance(exc, bx.ConnectionError) and never_connected(exc):
            return Failure(Reason.UNREACHABLE, unreachable(self.endpoint, exc, self.timeout, setting))
        if isinstance(exc, bx.SSLError):
            return Failure(Reason.UNREACHABLE,
                           f"endpoint {self.endpoint}: TLS failed ({first_line(str(exc))}); check {setting}")
        if isinstance(exc, bx.HTTPClientError) and "Invalid header value" in str(exc):
            return Failure(Reason.BAD_CREDENTIALS,
                           "bad credentials: checkpointStorage.accessKey or secretKey holds a line break or "
                           "another character HTTP headers cannot carry")
        if isinstance(exc, bx.ConnectionError | bx.HTTPClientError):
            return Failure(Reason.OTHER, f"the connection to {self.endpoint} broke: {first_line(str(exc))}")
        return Failure(Reason.OTHER, f"{type(exc).__name__}: {first_line(str(exc))}")

    def _explain_answer(self, response: Any, step: Step) -> Failure:
        """S3 answered with an error code."""
        error = response.get("Error", {})
        code = str(error.get("Code", ""))
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        text = first_line(str(error.get("Message", "")))
        where = f" at {self.endpoint}" if self._storage.endpoint_url else ""
        if code == "NoSuchBucket":
            return Failure(Reason.NO_SUCH_BUCKET,
                           f"no such bucket '{self.bucket}'{where}; "
                           "create it or fix checkpointStorage.bucket")
        if code in _BAD_KEY:
            return Failure(Reason.BAD_CREDENTIALS,
                           f"bad credentials: the access key ID is not known{where}; "
                           "check checkpointStorage.accessKey")
        if code in _BAD_SECRET:
            return Failure(Reason.BAD_CREDENTIALS,
                           "bad credentials: the secret key does not match the access key ID; "
                           "check checkpointStorage.secretKey")
        if code in _BAD_TOKEN:
            return Failure(Reason.BAD_CREDENTIALS,
                           f"bad credentials: the session token is invalid or expired ({code})")
        if code in _DENIED or status == 403:
            return Failure(Reason.ACCESS_DENIED,
                           f"access denied: the credentials need {PERMISSION[step]} on "
                           f"{self._resource(step)}")
        if code == "NoSuchKey":
            return Failure(Reason.OTHER, f"the probe object written a moment ago is not there ({code})")
        if code in _WRONG_REGION:
            return Failure(Reason.OTHER,
                           f"bucket '{self.bucket}' is in another region than the client uses: "
                           f"set AWS_REGION to the bucket's region ({code}: {text})")
        if code.isdigit():  # an HTTP status without an S3 error code: not an S3 endpoint, or a wrong path
            return Failure(Reason.OTHER, f"{self.endpoint} answered {code} {text} without an S3 error code; "
                                         "is checkpointStorage.endpointUrl an S3 endpoint?")
        return Failure(Reason.OTHER, f"S3 error {code or status}{where}: {text}")
