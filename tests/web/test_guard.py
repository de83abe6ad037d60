"""The address guard on its own: which addresses are public, how numeric hosts are read,
what the backend connects to, and that TLS still checks the name (issue 18)."""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
from pathlib import Path

import httpcore
import pytest
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from hypothesis import given
from hypothesis import strategies as st

from kernel.core.errors import ToolError
from kernel.web.guard import (
    BlockedAddressError,
    GuardedBackend,
    address_problem,
    ip_literal,
)
from tests.conftest import free_port
from tests.web.site import PUBLIC_IP, Names, Nat

PUBLIC = [
    "8.8.8.8",
    PUBLIC_IP,
    "2606:4700::1111",
    "::ffff:8.8.8.8",  # mapped, to a public address
    "2002:808:808::",  # 6to4 around 8.8.8.8
    "64:ff9b::808:808",  # NAT64 around 8.8.8.8
]
NOT_PUBLIC = {
    "127.0.0.1": "loopback",
    "127.255.0.9": "loopback",
    "::1": "loopback",
    "10.9.8.7": "private",
    "172.31.0.1": "private",
    "192.168.0.1": "private",
    "fd12::1": "private",
    "169.254.1.1": "link-local",
    "fe80::1": "link-local",
    "fe80::1%eth0": "link-local",
    "fec0::a00:1": "site-local",
    "169.254.169.254": "cloud metadata",
    "fd00:ec2::254": "cloud metadata",
    "100.100.100.200": "cloud metadata",
    "100.64.0.1": "shared (CGNAT)",
    "100.127.255.254": "shared (CGNAT)",
    "0.0.0.0": "unspecified",
    "::": "unspecified",
    "224.0.0.251": "multicast",
    "ff02::fb": "multicast",
    "::ffff:10.0.0.1": "private, inside an IPv6 address",
    "::127.0.0.1": "loopback, inside an IPv6 address",  # IPv4-compatible
    "::ffff:0:7f00:1": "loopback, inside an IPv6 address",  # IPv4-translated
    "2002:a00:1::": "private, inside an IPv6 address",  # 6to4 around 10.0.0.1
    "64:ff9b::a9fe:a9fe": "cloud metadata, inside an IPv6 address",  # NAT64
    "64:ff9b:1::1": "private (local NAT64)",
}


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_pass(address: str) -> None:
    assert address_problem(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize(("address", "kind"), sorted(NOT_PUBLIC.items()))
def test_other_addresses_are_named(address: str, kind: str) -> None:
    assert address_problem(ipaddress.ip_address(address)) == kind


def test_the_reserved_and_documentation_ranges_are_not_public() -> None:
    for address in ("240.0.0.1", "255.255.255.255", "192.0.2.1", "198.18.0.1", "2001:db8::1"):
        assert address_problem(ipaddress.ip_address(address)) is not None, address


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("2130706433", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("0x7F000001", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("10.1", "10.0.0.1"),
        ("0", "0.0.0.0"),
        ("127.0.0.1.", "127.0.0.1"),  # a trailing dot, as in a fully-qualified name
        ("[::1]", "::1"),
        ("::ffff:7f00:1", "::ffff:127.0.0.1"),
    ],
)
def test_numeric_hosts_are_read_as_the_resolver_reads_them(host: str, address: str) -> None:
    assert ip_literal(host) == ipaddress.ip_address(address)


@pytest.mark.parametrize("host", ["example.com", "08", "0x", "1.2.3.4.5", "256.1.1.1", "1..2", ""])
def test_names_and_non_addresses_are_not_literals(host: str) -> None:
    assert ip_literal(host) is None


@given(st.text(alphabet="0123456789abcdefxX.", max_size=24))
def test_ipv4_spellings_agree_with_inet_aton(host: str) -> None:
    try:
        expected: str | None = socket.inet_ntoa(socket.inet_aton(host))
    except OSError:
        expected = None
    found = ip_literal(host)
    if expected is not None:
        assert found == ipaddress.IPv4Address(expected)
    elif not host.endswith("."):  # a trailing dot is a name's, read here as the address
        assert found is None


async def test_vet_refuses_a_name_if_any_address_is_not_public() -> None:
    guard = GuardedBackend(allow_private=False, resolver=Names({"a.test": [PUBLIC_IP, "::1"]}))
    with pytest.raises(BlockedAddressError, match=r"a.test resolves to ::1") as refused:
        await guard.vet("a.test", 443)
    assert refused.value.kind == "loopback"


async def test_vet_with_private_allowed_passes_everything_once() -> None:
    names = Names({"a.test": ["10.0.0.1", "10.0.0.1", "::1"]})
    guard = GuardedBackend(allow_private=True, resolver=names)
    assert await guard.vet("a.test", 80) == ["10.0.0.1", "::1"]
    assert await guard.vet("0x7f.1", 80) == ["127.0.0.1"]  # no lookup for a literal
    assert names.asked == ["a.test"]


async def test_a_name_that_does_not_resolve_is_a_tool_error() -> None:
    async def empty(host: str, port: int) -> list[str]:
        return []

    with pytest.raises(ToolError, match="no.test could not be resolved"):
        await GuardedBackend(allow_private=False, resolver=Names({})).vet("no.test", 80)
    with pytest.raises(ToolError, match="could not be resolved"):
        await GuardedBackend(allow_private=False, resolver=empty).vet("none.test", 80)


async def test_the_backend_tries_each_vetted_address_in_turn() -> None:
    class Refusing(Nat):
        async def connect_tcp(self, host: str, port: int, *args: object, **kw: object) -> object:  # type: ignore[override]
            if host == "93.184.215.15":
                self.connects.append((host, port))
                raise httpcore.ConnectError("refused")
            return await super().connect_tcp(host, port)

    async with _served(web.Application()) as port:
        nat = Refusing()
        names = Names({"two.test": ["93.184.215.15", PUBLIC_IP]})
        guard = GuardedBackend(allow_private=False, resolver=names, network=nat)
        stream = await guard.connect_tcp("two.test", port)
        await stream.aclose()
        assert nat.connects == [("93.184.215.15", port), (PUBLIC_IP, port)]
        with pytest.raises(BlockedAddressError, match="local sockets"):
            await guard.connect_unix_socket("/run/docker.sock")


async def test_tls_verifies_and_names_the_host_though_the_address_was_connected_to(
    tmp_path: Path,
) -> None:
    cert, key = _self_signed("public.test", tmp_path)
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert, key)
    sni: list[str | None] = []
    server.sni_callback = lambda sock, name, context: sni.append(name)  # type: ignore[assignment]
    app = web.Application()
    app.router.add_get("/", _ok)
    client = ssl.create_default_context(cafile=str(cert))
    names = Names({"public.test": [PUBLIC_IP], "other.test": [PUBLIC_IP]})
    async with _served(app, server) as port:
        nat = Nat()
        guard = GuardedBackend(allow_private=False, resolver=names, network=nat)
        async with httpcore.AsyncConnectionPool(ssl_context=client, network_backend=guard) as pool:
            answer = await pool.request("GET", f"https://public.test:{port}/")
            assert answer.status == 200
            assert nat.connects == [(PUBLIC_IP, port)]
            assert sni == ["public.test"]
            # The same address under a name the certificate does not carry: refused.
            with pytest.raises(httpcore.ConnectError, match="(?i)certificate|hostname"):
                await pool.request("GET", f"https://other.test:{port}/")


async def _ok(request: web.Request) -> web.Response:
    return web.Response(text="ok")


class _served:
    """An aiohttp app on 127.0.0.1 (TLS with ``context``) for one test; yields the port."""

    def __init__(self, app: web.Application, context: ssl.SSLContext | None = None) -> None:
        self.app, self.context = app, context
        self.runner = web.AppRunner(app, shutdown_timeout=0.5, access_log=None)

    async def __aenter__(self) -> int:
        await self.runner.setup()
        port = free_port()
        await web.TCPSite(self.runner, "127.0.0.1", port, ssl_context=self.context).start()
        return port

    async def __aexit__(self, *exc: object) -> None:
        await self.runner.cleanup()


def _self_signed(name: str, folder: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path
