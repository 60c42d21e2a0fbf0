"""Settings of the live servers of ``test_cimd_e2e.py``: the live servers' settings
(``tests.support.live_settings``, i.e. the example project's) with the tests' loopback
fetcher of client metadata documents (``tests.signin.cimd_documents``).

``SIGNIN_TEST_CIMD=off`` turns Client ID Metadata Documents off, as a site that does not
accept them would: clients then register (RFC 7591).
"""

import os

from tests.support.live_settings import *  # noqa: F403
from tests.support.live_settings import OAUTH2_PROVIDER

OAUTH2_PROVIDER = {
    **OAUTH2_PROVIDER,
    "CIMD_METADATA_FETCHER": "tests.signin.cimd_documents.LoopbackFetcher",
    "CIMD_ENABLED": os.environ.get("SIGNIN_TEST_CIMD", "on") != "off",
}
