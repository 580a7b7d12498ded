"""Starts moto's server (``python moto_launch.py -H 127.0.0.1 -p PORT``) with two corrections to
its authentication, which test_aws.py relies on to refuse wrong credentials.

moto recomputes a request's SigV4 signature over the URL as Werkzeug decoded it: what the client
percent-encoded as SigV4 requires (``prefix=wh%2Ft%2F`` in an S3 listing, ``day%3D1`` in a key, as
the AWS SDKs, object_store and DuckDB send them) is hashed decoded and the request refused with
``SignatureDoesNotMatch``. Here the check sees the path and query exactly as they were sent
(``RAW_URI`` of the WSGI request). And STS's ``AssumeRoleWithWebIdentity`` (EKS's web identity
tokens), which AWS serves unsigned, is not refused for lacking a signature. Everything else is
moto's own code.
"""

from __future__ import annotations

import sys
from urllib.parse import urlsplit

from moto.core import authorization, responses
from moto.server import main

# STS calls AWS accepts unsigned (the token is the credential); moto's check wants a signature.
UNSIGNED_ACTIONS = {"AssumeRoleWithWebIdentity", "AssumeRoleWithSAML"}

_setup_class = responses.BaseResponse.setup_class
_authenticate = authorization.ActionAuthenticatorMixin._authenticate_and_authorize_action


def setup_class(self, request, full_url, headers, use_raw_body=False):
    _setup_class(self, request, full_url, headers, use_raw_body)
    environ = getattr(request, "environ", None) or {}
    sent = environ.get("RAW_URI") or environ.get("REQUEST_URI")
    parsed = urlsplit(full_url)
    self._sent_uri = f"{parsed.scheme}://{parsed.netloc}{sent}" if sent else full_url


def authenticate(self, iam_request_cls, resource="*"):
    action = (getattr(self, "querystring", None) or {}).get("Action") or [None]
    if action[0] in UNSIGNED_ACTIONS:
        return None
    decoded = self.uri
    self.uri = getattr(self, "_sent_uri", decoded)
    try:
        return _authenticate(self, iam_request_cls, resource)
    finally:
        self.uri = decoded


responses.BaseResponse.setup_class = setup_class
authorization.ActionAuthenticatorMixin._authenticate_and_authorize_action = authenticate

if __name__ == "__main__":
    main(sys.argv[1:])
