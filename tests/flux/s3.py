"""An S3 server on loopback for ``Bucket`` sources: moto in server mode (a dev dependency already used
for the AWS KMS tests), with a small API to fill buckets.

    with S3Server() as s3:
        s3.create_bucket("app")
        s3.put_files("app", {"kustomization.yaml": "...", "cm.yaml": "..."}, replace=True)
        s3.endpoint                       # "127.0.0.1:PORT", for a Bucket's spec.endpoint (insecure: true)
        s3.secret_data()                  # {"accesskey": ..., "secretkey": ...} for its spec.secretRef

moto accepts any credentials; the ones given here are fixed test values. The server runs in a thread of
the test process and is stopped on exit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

REGION = "us-east-1"
ACCESS_KEY = "e2e-access-key"
SECRET_KEY = "e2e-secret-key"


@dataclass
class S3Server:
    """moto's S3 on ``127.0.0.1`` (module contract)."""

    host: str = "127.0.0.1"
    port: int = 0
    _server: Any = None

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.endpoint}"

    def __enter__(self) -> S3Server:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        from moto.server import ThreadedMotoServer

        self._server = ThreadedMotoServer(ip_address=self.host, port=self.port, verbose=False)
        self._server.start()
        self.host, self.port = self._server.get_host_and_port()

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def client(self) -> Any:
        import boto3

        return boto3.client("s3", region_name=REGION, endpoint_url=self.url, aws_access_key_id=ACCESS_KEY,
                            aws_secret_access_key=SECRET_KEY)

    @staticmethod
    def secret_data() -> dict[str, str]:
        """The ``accesskey``/``secretkey`` of a Bucket's ``spec.secretRef`` Secret (``stringData``)."""
        return {"accesskey": ACCESS_KEY, "secretkey": SECRET_KEY}

    def create_bucket(self, name: str) -> None:
        self.client().create_bucket(Bucket=name)

    def put_files(self, bucket: str, files: Mapping[str, str | bytes | None], *, replace: bool = False) -> None:
        """Upload ``files`` (key: text or bytes; ``None`` deletes the key); ``replace`` first deletes every
        key not in ``files``."""
        client = self.client()
        if replace:
            listed = client.list_objects_v2(Bucket=bucket).get("Contents", [])
            for item in listed:
                if item["Key"] not in files:
                    client.delete_object(Bucket=bucket, Key=item["Key"])
        for key, content in files.items():
            if content is None:
                client.delete_object(Bucket=bucket, Key=key)
            else:
                client.put_object(Bucket=bucket, Key=key,
                                  Body=content.encode() if isinstance(content, str) else content)
