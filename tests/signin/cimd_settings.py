"""Settings of the live servers of ``test_cimd_e2e.py``: the live servers' settings
(``tests.support.live_settings``, i.e. the example project's) with the example's fetcher of
client metadata documents allowed to read them on loopback (``tests.signin.cimd_documents``;
the server's environment trusts the test authority).

``SIGNIN_TEST_CIMD=off`` turns Client ID Metadata Documents off, as a site that does not
accept them would: clients then register (RFC 7591).
"""

import os

from tests.support.live_settings import *  # noqa: F403
from tests.support.live_settings import OAUTH2_PROVIDER

OAUTH2_PROVIDER = {
    **OAUTH2_PROVIDER,
    "CIMD_METADATA_FETCHER": "tests.signin.cimd_documents.LoopbackAllowedFetcher",
    "CIMD_ENABLED": os.environ.get("SIGNIN_TEST_CIMD", "on") != "off",
}
