"""Prediction server over loopback: hostile input (found by a fuzzer) gets a 4xx, never a 500.

Raw sockets, because HTTP clients refuse to send most of these requests.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time

import pytest

from cosim.errors import InputError
from predictors.__main__ import main
from predictors.bundle import ModelBundle
from predictors.server import ServerProcess, make_app, start_server

TOKEN = "sek ret"
AUTH = b"Authorization: Bearer " + TOKEN.encode() + b"\r\n"


@pytest.fixture(scope="module")
def server(service_models):
    with ServerProcess(service_models, "--token", TOKEN, "--max-body-mb", "1") as srv:
        yield srv


def exchange(url: str, request: bytes, timeout_s: float = 10.0) -> bytes:
    """Send ``request`` on a fresh connection; everything the server sends until it closes."""
    host, port = url.split("//")[1].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def split(answer: bytes) -> tuple[int, bytes, bytes]:
    """(status, head, payload) of a raw HTTP answer."""
    head, _, payload = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), head, payload


def assert_healthy(server, since: int) -> None:
    """The server still answers, and logged no traceback nor ERROR after ``since``."""
    status, _, payload = split(exchange(server.url, b"GET /health HTTP/1.1\r\nHost: x\r\n"
                                        + AUTH + b"Connection: close\r\n\r\n"))
    assert status == 200 and json.loads(payload)["status"] == "ok"
    new = server.stderr()[since:]
    assert "Traceback" not in new and "ERROR" not in new, new


@pytest.mark.parametrize("given", [b"Bearer \xc3\xa9\xff", b"\xff", b"Bearer sek r\xc3\xa9t"])
def test_non_ascii_authorization_is_401(server, given):
    since = len(server.stderr())
    status, head, payload = split(exchange(server.url, b"GET /health HTTP/1.1\r\nHost: x\r\n"
                                           b"Authorization: " + given + b"\r\n"
                                           b"Connection: close\r\n\r\n"))
    assert status == 401, payload
    assert json.loads(payload) == {"error": "wrong bearer token",
                                   "field": "headers.Authorization"}
    assert b'WWW-Authenticate: Bearer error="invalid_token"' in head
    assert_healthy(server, since)


def test_non_ascii_token_matches_its_utf8_bytes(service_models):
    bundle = ModelBundle.load(service_models)

    async def main_():
        srv = await start_server(bundle, token="sek rét")
        try:
            loop = asyncio.get_running_loop()
            return [await loop.run_in_executor(None, exchange, srv.url, (
                b"GET /health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + sent
                + b"\r\nConnection: close\r\n\r\n")) for sent in (b"sek r\xc3\xa9t", b"sek r\xe9t")]
        finally:
            await srv.close()

    right, latin1 = asyncio.run(main_())
    assert split(right)[0] == 200
    assert split(latin1)[0] == 401


@pytest.mark.parametrize("encoding", [b"gzip", b"deflate"])
def test_undecompressable_body_is_400(server, encoding):
    since = len(server.stderr())
    answer = exchange(server.url, b"POST /v1/runtime HTTP/1.1\r\nHost: x\r\n" + AUTH
                      + b"Content-Encoding: " + encoding + b"\r\nContent-Length: 7\r\n\r\n"
                      + b"garbage")
    status, head, payload = split(answer)
    assert status == 400, answer
    assert json.loads(payload) == {"error": "request body could not be decompressed "
                                            f"(Content-Encoding: {encoding.decode()})",
                                   "field": "body"}
    assert b"Connection: close" in head    # closed at once: exchange() returned
    assert_healthy(server, since)


@pytest.mark.parametrize("request_bytes, reason", [
    (b"POST /v1/runtime HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
     "Invalid character in Content-Length:"),
    (b"GET /health HTTP/1.1\r\nHost: x\r\nX: \x00\r\n\r\n", "Invalid header value char:"),
])
def test_malformed_requests_log_one_line_without_traceback(server, request_bytes, reason):
    since = len(server.stderr())
    for _ in range(3):
        status, _, _ = split(exchange(server.url, request_bytes))
        assert status == 400     # aiohttp's own plain-text answer
    time.sleep(0.2)              # the log line is written after the answer
    new = server.stderr()[since:]
    assert new.count(f"malformed HTTP request from 127.0.0.1 answered 400: {reason}\n") == 3, new
    assert_healthy(server, since)


def test_max_body_mb_is_bounded(service_models, capsys):
    bundle = ModelBundle.load(service_models)
    with pytest.raises(InputError, match=r"^--max-body-mb: expected a number > 0 and <= 1024, "
                                         r"got 1025$"):
        make_app(bundle, max_body_mb=1025)
    make_app(bundle, max_body_mb=1024)
    assert main(["serve", "--models", str(service_models), "--port", "0",
                 "--max-body-mb", "1e308"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "error: --max-body-mb: expected a number > 0 and <= 1024, got 1e+308"
    assert not any("Traceback" in line for line in err)


def test_header_timeout_must_be_finite_and_positive(service_models):
    bundle = ModelBundle.load(service_models)
    for bad in (0, -1, float("inf"), float("nan")):
        with pytest.raises(InputError, match=r"^header_timeout_s: expected a finite number > 0"):
            make_app(bundle, header_timeout_s=bad)


def test_incomplete_headers_are_closed_after_header_timeout(service_models):
    """A slowloris: 40 connections that send part of a request (or nothing), then wait."""
    bundle = ModelBundle.load(service_models)
    partial = [b"", b"GET /hea", b"POST /v1/runtime HTTP/1.1\r\nHost: x\r\nContent-Le"]

    async def hold(port, data):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(data)
        await writer.drain()
        start = asyncio.get_running_loop().time()
        try:
            got = await asyncio.wait_for(reader.read(), 10.0)   # b"" once the server closes
        except TimeoutError:
            got = b"<still open>"
        writer.close()
        return got, asyncio.get_running_loop().time() - start

    async def main_():
        srv = await start_server(bundle, header_timeout_s=0.5)
        try:
            held = [asyncio.create_task(hold(srv.port, partial[i % 3])) for i in range(40)]
            await asyncio.sleep(0.1)
            # others are answered meanwhile, and a request that completes in time is too
            reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
            writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\n")
            await writer.drain()
            await asyncio.sleep(0.2)
            writer.write(b"Connection: close\r\n\r\n")
            ok = await asyncio.wait_for(reader.read(), 10.0)
            writer.close()
            return ok, await asyncio.gather(*held)
        finally:
            await srv.close()

    ok, held = asyncio.run(main_())
    assert ok.startswith(b"HTTP/1.1 200")
    assert all(got == b"" for got, _ in held), {got for got, _ in held}
    assert max(took for _, took in held) < 3.0, max(took for _, took in held)


def test_the_header_timeout_is_a_serve_option():
    from predictors.__main__ import build_parser

    args = build_parser().parse_args(["serve", "--models", "m", "--header-timeout", "3"])
    assert args.header_timeout == 3.0
    assert build_parser().parse_args(["serve", "--models", "m"]).header_timeout == 20.0
