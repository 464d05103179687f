"""Blobs in an S3-compatible object store: ``s3://bucket/prefix`` as the artifact root.

Keys are ``<prefix>/ab/cd/<sha256>`` (the local layout). boto3 is the optional ``s3`` extra
and is imported only when such a root is opened. The endpoint, credentials and region come
from boto3's usual sources (``AWS_ACCESS_KEY_ID``, ``~/.aws``, instance roles); a non-AWS
server (MinIO, Ceph, moto) is named by ``AWS_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_S3`` or the
``TRACKER_S3_ENDPOINT_URL`` variable.

Files are uploaded with boto3's managed transfer: past ``MULTIPART_THRESHOLD`` (64 MiB) as a
multipart upload in ``MULTIPART_CHUNK`` parts, each retried by boto3. The file is hashed
before it is sent (a mismatch stores nothing), and an object that already exists is not sent
again: blobs are content addressed, so same key means same bytes. Connection and
authorisation errors become :class:`~tracker.errors.StoreUnavailable` naming the bucket.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from tracker.errors import InvalidInput, NotFound, StoreUnavailable
from tracker.store.blobs import BlobHashMismatch, check_sha256, hash_file

__all__ = ["MULTIPART_CHUNK", "MULTIPART_THRESHOLD", "MissingExtra", "S3BlobStore"]

MULTIPART_THRESHOLD = 64 * 1024 * 1024
MULTIPART_CHUNK = 16 * 1024 * 1024
ENDPOINT_ENV = "TRACKER_S3_ENDPOINT_URL"


class MissingExtra(InvalidInput):
    """The artifact root needs an optional extra that is not installed."""

    code = "missing_extra"


def _boto3() -> Any:
    try:
        import boto3
    except ImportError as exc:
        raise MissingExtra(
            "an s3:// artifact root needs boto3, which is not installed: pip install 'tracker[s3]'",
            field="artifact_root",
        ) from exc
    return boto3


class S3BlobStore:
    """Blobs under ``s3://bucket/prefix``.

    Raises (constructor):
        InvalidInput: the URL has no bucket; ``MissingExtra`` (an InvalidInput): boto3 is not
            installed (the message names the ``s3`` extra).
    """

    def __init__(self, url: str, *, client: Any = None) -> None:
        if not url.startswith("s3://"):
            raise InvalidInput(f"{url!r} is not an s3://bucket/prefix URL", field="artifact_root")
        bucket, _, prefix = url[len("s3://") :].partition("/")
        if not bucket:
            raise InvalidInput(
                f"{url!r} names no bucket (s3://bucket/prefix)", field="artifact_root"
            )
        self.url = url
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        boto3 = _boto3()
        if client is None:
            endpoint = os.environ.get(ENDPOINT_ENV) or None
            client = boto3.client("s3", endpoint_url=endpoint)
        self.client = client
        from boto3.s3.transfer import TransferConfig

        self.transfer = TransferConfig(
            multipart_threshold=MULTIPART_THRESHOLD, multipart_chunksize=MULTIPART_CHUNK
        )

    def __repr__(self) -> str:
        return f"S3BlobStore({self.url!r})"

    def _key(self, sha256: str) -> str:
        check_sha256(sha256)
        tail = f"{sha256[:2]}/{sha256[2:4]}/{sha256}"
        return f"{self.prefix}/{tail}" if self.prefix else tail

    def _unavailable(self, exc: Exception) -> StoreUnavailable:
        return StoreUnavailable(
            f"the artifact store {self.url} cannot be used: {exc}", field="artifact_root"
        )

    def _call(self, method: str, **kwargs: Any) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return getattr(self.client, method)(Bucket=self.bucket, **kwargs)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in ("404", "NoSuchKey", "NotFound"):
                raise NotFound(
                    f"blob {kwargs.get('Key')} is not in {self.url}", field="sha256"
                ) from exc
            raise self._unavailable(exc) from exc
        except BotoCoreError as exc:
            raise self._unavailable(exc) from exc

    def exists(self, sha256: str) -> bool:
        try:
            self._call("head_object", Key=self._key(sha256))
        except NotFound:
            return False
        return True

    def flush(self) -> None:
        """Nothing to do: every PUT is durable when it returns."""

    def put_file(self, path: Path, sha256: str, *, sync: bool = True) -> None:
        del sync  # an object store is durable once the PUT returns
        key = self._key(sha256)
        if self.exists(sha256):
            return
        actual, _ = hash_file(path)
        if actual != sha256:
            raise BlobHashMismatch(
                f"{path} hashes to {actual}, not the announced {sha256}; nothing stored",
                field="sha256",
            )
        from boto3.exceptions import S3UploadFailedError
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.upload_file(str(path), self.bucket, key, Config=self.transfer)
        except (S3UploadFailedError, ClientError, BotoCoreError) as exc:
            raise self._unavailable(exc) from exc

    def put_bytes(self, data: bytes) -> str:
        sha256 = hashlib.sha256(data).hexdigest()
        if not self.exists(sha256):
            self._call("put_object", Key=self._key(sha256), Body=data)
        return sha256

    def open(self, sha256: str) -> BinaryIO:
        body = self._call("get_object", Key=self._key(sha256))["Body"]
        return body  # type: ignore[no-any-return]  # botocore StreamingBody: read(n), close()

    def delete(self, sha256: str) -> None:
        self._call("delete_object", Key=self._key(sha256))

    def iter_hashes(self) -> Iterator[tuple[str, int, float]]:
        from botocore.exceptions import BotoCoreError, ClientError

        paginator = self.client.get_paginator("list_objects_v2")
        start = f"{self.prefix}/" if self.prefix else ""
        try:
            for page in paginator.paginate(Bucket=self.bucket, Prefix=start):
                for item in page.get("Contents", ()):
                    name = item["Key"][len(start) :]
                    parts = name.split("/")
                    if len(parts) == 3 and parts[2].startswith(parts[0] + parts[1]):
                        try:
                            sha256 = check_sha256(parts[2])
                        except InvalidInput:
                            continue  # not ours
                        yield sha256, int(item["Size"]), item["LastModified"].timestamp()
        except (ClientError, BotoCoreError) as exc:
            raise self._unavailable(exc) from exc
