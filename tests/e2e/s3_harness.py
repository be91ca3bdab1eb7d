"""An S3-compatible server on loopback for the tests: moto's server mode, a real S3 API over HTTP.

>>> with moto_s3("lake") as (endpoint, client):   # doctest: +SKIP
...     objects(client, "lake", "wh/")
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from cluster_harness import free_port

KEY_ID, SECRET = "arctic-test-key", "arctic-test-secret-value"


@contextmanager
def moto_s3(bucket: str) -> Iterator[tuple[str, Any]]:
    """A server on a free loopback port with one bucket: its endpoint and a boto3 client."""
    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # a line for every request otherwise
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        endpoint = f"http://127.0.0.1:{port}"
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                              aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET)
        client.create_bucket(Bucket=bucket)
        yield endpoint, client
    finally:
        server.stop()


def storage_properties(endpoint: str) -> dict[str, str]:
    """The catalog properties of the server's store, in pyiceberg's names."""
    return {"s3.endpoint": endpoint, "s3.access-key-id": KEY_ID, "s3.secret-access-key": SECRET,
            "s3.region": "us-east-1", "s3.path-style-access": "true"}


def objects(client: Any, bucket: str, prefix: str) -> list[str]:
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return sorted(o["Key"] for page in pages for o in page.get("Contents", []))
