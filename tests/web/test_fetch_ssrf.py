"""web_fetch never connects to a loopback, private, link-local or metadata address unless
[web] allow_private: whatever the URL's spelling, after DNS, and on every redirect. Each
refusal is checked twice: the words the model reads, and that NOTHING was fetched (the
site counts its hits, the network backend every connection it was asked to open)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from kernel.config.web import WebConfig
from kernel.core.errors import ToolError
from kernel.web.fetch import fetch
from kernel.web.guard import BlockedAddressError
from tests.conftest import free_port
from tests.web.site import PUBLIC_IP, Names, Nat, Site

CLOSED = WebConfig()  # the default: allow_private = false
HINT = r"set \[web\] allow_private = true to allow it"


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    async with Site(port=free_port()) as running:
        yield running


@pytest.mark.parametrize(
    ("host", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("[::1]", "loopback"),
        ("[::ffff:127.0.0.1]", "loopback, inside an IPv6 address"),
        ("[::ffff:7f00:1]", "loopback, inside an IPv6 address"),
        ("2130706433", "loopback"),  # decimal
        ("0177.0.0.1", "loopback"),  # octal
        ("0x7f000001", "loopback"),  # hex
        ("0x7f.1", "loopback"),
        ("127.1", "loopback"),
        ("169.254.169.254", "cloud metadata"),
        ("[fd00:ec2::254]", "cloud metadata"),
        ("100.100.100.200", "cloud metadata"),
        ("10.0.0.1", "private"),
        ("192.168.1.1", "private"),
        ("[fc00::1]", "private"),
        ("[fe80::1]", "link-local"),
        ("100.64.0.1", r"shared \(CGNAT\)"),
        ("0.0.0.0", "unspecified"),
        ("[2002:7f00:1::]", "loopback, inside an IPv6 address"),  # 6to4 around 127.0.0.1
        ("[64:ff9b::a00:1]", "private, inside an IPv6 address"),  # NAT64 around 10.0.0.1
    ],
)
async def test_an_address_in_the_url_is_refused_with_nothing_fetched(
    site: Site, host: str, kind: str
) -> None:
    nat = Nat()
    url = f"http://{host}:{site.port}/secret"
    with pytest.raises(BlockedAddressError, match=rf"is not a public address \({kind}\); .*{HINT}"):
        await fetch(url, CLOSED, network=nat)
    assert site.hits == [] and nat.connects == []


async def test_the_same_urls_are_fetched_when_private_addresses_are_allowed(site: Site) -> None:
    opened = WebConfig(allow_private=True)
    for host in ("127.0.0.1", "2130706433", "0x7f.1", "127.1"):
        result = await fetch(f"http://{host}:{site.port}/secret", opened)
        assert result["status"] == 200
    assert site.hits == ["/secret"] * 4


async def test_a_name_resolving_to_a_private_address_is_refused(site: Site) -> None:
    nat = Nat()
    names = Names(
        {
            "intranet.test": ["127.0.0.1"],
            "mixed.test": [PUBLIC_IP, "10.1.2.3"],  # ANY private address refuses the name
            "mapped.test": ["::ffff:127.0.0.1"],
            "metadata.test": ["169.254.169.254"],
        }
    )
    for name, kind in [
        ("intranet.test", r"127.0.0.1, which is not a public address \(loopback\)"),
        ("mixed.test", r"10.1.2.3, which is not a public address \(private\)"),
        ("mapped.test", r"::ffff:127.0.0.1, which is not a public address \(loopback, inside"),
        ("metadata.test", r"169.254.169.254, which is not a public address \(cloud metadata\)"),
    ]:
        with pytest.raises(BlockedAddressError, match=rf"{name} resolves to {kind}"):
            await fetch(f"http://{name}:{site.port}/secret", CLOSED, resolver=names, network=nat)
    assert names.asked == ["intranet.test", "mixed.test", "mapped.test", "metadata.test"]
    assert site.hits == [] and nat.connects == []


async def test_a_public_name_is_fetched_and_connected_to_by_its_vetted_address(
    site: Site,
) -> None:
    nat = Nat()
    names = Names({"public.test": [PUBLIC_IP]})
    result = await fetch(
        f"http://public.test:{site.port}/headers", CLOSED, resolver=names, network=nat
    )
    assert result["status"] == 200
    # The connection went to the address that was checked, never to the name again
    # (no second lookup to rebind); the Host header still names the site.
    assert nat.connects == [(PUBLIC_IP, site.port)]
    assert site.requests[0].headers["Host"] == f"public.test:{site.port}"


@pytest.mark.parametrize(
    ("target", "kind"),
    [
        ("http://127.0.0.1:{port}/secret", "loopback"),
        ("http://2130706433:{port}/secret", "loopback"),
        ("http://[::1]:{port}/secret", "loopback"),
        ("http://intranet.test:{port}/secret", "private"),
        ("http://169.254.169.254/latest/meta-data/", "cloud metadata"),
    ],
)
async def test_a_public_page_redirecting_to_a_private_address_is_refused(
    site: Site, target: str, kind: str
) -> None:
    nat = Nat()
    names = Names({"public.test": [PUBLIC_IP], "intranet.test": ["10.0.0.7"]})
    url = f"http://public.test:{site.port}/to?url={target.format(port=site.port)}"
    with pytest.raises(BlockedAddressError, match=rf"not a public address \({kind}\); .*{HINT}"):
        await fetch(url, CLOSED, resolver=names, network=nat)
    # The first hop was allowed and fetched; the redirect's target was never reached.
    assert site.hits == ["/to"]
    assert nat.connects == [(PUBLIC_IP, site.port)]


async def test_an_unknown_name_is_refused_by_name(site: Site) -> None:
    nat = Nat()
    with pytest.raises(ToolError, match=r"nowhere.test could not be resolved"):
        await fetch("https://nowhere.test/", CLOSED, resolver=Names({}), network=nat)
    assert nat.connects == []
