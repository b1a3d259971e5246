"""Prediction server over loopback: request checks, limits, tokens, shutdown, the CLI."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import socket
import urllib.error
import urllib.request

import aiohttp
import pytest

from predictors.__main__ import build_parser, main
from predictors.bundle import ModelBundle
from predictors.server import ServerProcess, start_server
from predictors.service import dataset_batch, encode_batch

TOKEN = "tok-123"
LIMIT_MB = 0.5


@pytest.fixture(scope="module")
def server(service_models):
    with ServerProcess(service_models, "--token", TOKEN, "--max-body-mb", str(LIMIT_MB)) as srv:
        yield srv


@pytest.fixture(scope="module")
def batches(service_data):
    return {"runtime": dataset_batch(service_data, kind="runtime", n=5),
            "remaining": dataset_batch(service_data, kind="remaining", n=5)}


_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))   # never a proxy


def call(url, path, body=None, token=TOKEN, headers=None):
    """(status, JSON answer, headers) of one plain HTTP request."""
    req = urllib.request.Request(url + path, data=body, headers=dict(headers or {}),
                                 method="POST" if body is not None else "GET")
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with _opener.open(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read()), resp.headers
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read()), err.headers


def body_of(batch) -> bytes:
    return encode_batch(batch)


def assert_still_serving(server, batches):
    status, answer, _ = call(server.url, "/v1/runtime", body_of(batches["runtime"]))
    assert status == 200 and answer["n"] == 5 and len(answer["predictions"]) == 5


# ----------------------------------------------------------------------------- good requests


def test_predict_answers(server, batches, service_models):
    bundle = ModelBundle.load(service_models)
    for kind in ("runtime", "remaining"):
        status, answer, headers = call(server.url, f"/v1/{kind}", body_of(batches[kind]))
        assert status == 200 and headers["Content-Type"].startswith("application/json")
        assert set(answer) == {"predictions", "model_version", "n"}
        assert answer["n"] == 5 and answer["model_version"] == bundle.version
        expected, _ = getattr(bundle, kind)(batches[kind])
        assert answer["predictions"] == expected.tolist()   # exact floats


def test_health_and_models(server, service_models):
    bundle = ModelBundle.load(service_models)
    status, health, _ = call(server.url, "/health")
    assert status == 200 and health["status"] == "ok"
    assert health["model_version"] == bundle.version and health["in_flight"] == 0
    status, info, _ = call(server.url, "/models")
    assert status == 200
    assert info["model_version"] == bundle.version
    assert info["feature_names"] == bundle.feature_names
    assert info["models"]["runtime"]["loaded"] and info["models"]["remaining"]["loaded"]
    assert info["models"]["runtime"]["class"] == "RuntimeRegressor"
    assert "+".join([info["models"]["runtime"]["version"],
                     info["models"]["remaining"]["version"]]) == bundle.version
    assert info["columns"]["runtime"] == ["job_id", *bundle.feature_names]
    assert info["columns"]["remaining"][-4:] == ["elapsed", "scf_done", "prerun", "progress"]
    assert info["categorical"]["PREC"] == list(bundle.spec.categorical["PREC"])
    assert info["limits"]["max_body_bytes"] == int(LIMIT_MB * 2**20)


# ----------------------------------------------------------------------------- bad requests


def without(batch, key):
    return {k: v for k, v in batch.items() if k != key}


def changed(batch, key, row, value):
    col = list(batch[key])
    col[row] = value
    return dict(batch, **{key: col})


BAD = [
    # (id, kind, body from the good batch, field, message)
    ("syntax", "runtime", lambda b: b'{"jobs": {"job_id": [1,', "body",
     "body: expected a JSON object {\"jobs\": {...}}, got invalid JSON (Expecting value at "
     "line 1 column 24)"),
    ("empty", "runtime", lambda b: b"", "body",
     'body: expected a JSON object {"jobs": {...}}, got an empty body'),
    ("not utf8", "runtime", lambda b: b'{"jobs": "\xff"}', "body",
     "body: expected a JSON object, got bytes that are not UTF-8 text"),
    ("top array", "runtime", lambda b: b"[1, 2]", "body",
     'body: expected a JSON object {"jobs": {...}}, got a JSON array'),
    ("top number", "runtime", lambda b: b"5", "body",
     'body: expected a JSON object {"jobs": {...}}, got a number'),
    ("no jobs", "runtime", lambda b: b'{"batch": {}}', "batch",
     "batch: expected only the key 'jobs' in the request body, got an unknown key"),
    ("jobs missing", "runtime", lambda b: b"{}", "jobs",
     'jobs: expected the batch columns under "jobs", got no such key'),
    ("jobs list", "runtime", lambda b: b'{"jobs": [1, 2]}', "jobs",
     "jobs: expected an object mapping column names to lists, got a list"),
    ("missing feature", "runtime", lambda b: body_of(without(b, "ENCUT")), "jobs.ENCUT",
     "jobs.ENCUT: expected a column with one value per job, got no such column"),
    ("wrong type", "runtime", lambda b: body_of(changed(b, "ENCUT", 3, "520eV")), "jobs.ENCUT",
     'jobs.ENCUT: expected numbers (null for unknown), got "520eV" (a string) in row 3'),
    ("column not list", "runtime", lambda b: body_of(dict(b, NSW=4)), "jobs.NSW",
     "jobs.NSW: expected a list with one value per job, got a number"),
    ("unequal", "runtime", lambda b: body_of(dict(b, cores=b["cores"] + [8])), "jobs.cores",
     "jobs.cores: expected 5 values, one per job like jobs.job_id, got 6 values"),
    ("categorical", "runtime", lambda b: body_of(changed(b, "PREC", 0, {"a": 1})), "jobs.PREC",
     'jobs.PREC: expected strings (or numbers, null for unknown), got {\'a\': 1} (an object) '
     "in row 0"),
    ("job id", "runtime", lambda b: body_of(changed(b, "job_id", 2, None)), "jobs.job_id",
     "jobs.job_id: expected strings or integers, got null in row 2"),
    ("no elapsed", "remaining", lambda b: body_of(without(b, "elapsed")), "jobs.elapsed",
     "jobs.elapsed: expected a column with one value per job, got no such column"),
    ("negative elapsed", "remaining", lambda b: body_of(changed(b, "elapsed", 1, -5.0)),
     "jobs.elapsed", "jobs.elapsed: expected numbers in [0, 1e+10], got -5.0 in row 1"),
    ("progress row", "remaining", lambda b: body_of(changed(b, "progress", 4, [[1, 2]])),
     "jobs.progress", "jobs.progress: expected per job a list of rows [elapsed, denergy, "
     "max_force, scf_steps] of numbers, got [1, 2] in row 4, step 0"),
    # ranges and finiteness: null says "unknown", nothing else does
    ("negative cores", "runtime", lambda b: body_of(changed(b, "cores", 1, -5)), "jobs.cores",
     "jobs.cores: expected numbers in [0, 1e+08] (null for unknown), got -5.0 in row 1"),
    ("nan feature", "runtime", lambda b: body_of(changed(b, "ENCUT", 2, float("nan"))),
     "jobs.ENCUT", "jobs.ENCUT: expected finite numbers in [0, 100000] (null for unknown), "
     "got nan in row 2"),
    ("huge feature", "runtime", lambda b: body_of(changed(b, "NSW", 0, 1e308)), "jobs.NSW",
     "jobs.NSW: expected numbers in [0, 1e+09] (null for unknown), got 1e+308 in row 0"),
    ("infinite elapsed", "remaining",
     lambda b: body_of(changed(b, "elapsed", 0, float("inf"))), "jobs.elapsed",
     "jobs.elapsed: expected finite numbers in [0, 1e+10], got inf in row 0"),
    # numbers and nesting the parser cannot take: 400 naming the field, never a 500
    ("huge int", "runtime", lambda b: body_of(changed(b, "cores", 0, 10**400)), "jobs.cores",
     "jobs.cores: expected finite numbers in [0, 1e+08] (null for unknown), got an integer of "
     "401 digits in row 0"),
    ("huge negative int", "remaining", lambda b: body_of(changed(b, "elapsed", 2, -12345))
     .replace(b"-12345", b"-" + b"9" * 5001),
     "jobs.elapsed", "jobs.elapsed: expected finite numbers in [0, 1e+10], got an integer of "
     "5001 digits in row 2"),
    ("huge int id", "runtime", lambda b: body_of(changed(b, "job_id", 1, 10**400)), "jobs.job_id",
     "jobs.job_id: expected strings or integers, got an integer of 401 digits (a number) in "
     "row 1"),
    ("deep nesting", "runtime", lambda b: b'{"jobs": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
     "body", 'body: expected a JSON object {"jobs": {...}} a few levels deep, got JSON nested '
     "too deep to parse"),
    ("deep nesting in a column", "runtime",
     lambda b: b'{"jobs": {"job_id": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}", "body",
     'body: expected a JSON object {"jobs": {...}} a few levels deep, got JSON nested '
     "too deep to parse"),
    ("nan progress", "remaining",
     lambda b: body_of(changed(b, "progress", 3, [[1.0, float("nan"), 0.1, 5]])),
     "jobs.progress", "jobs.progress: expected finite numbers within +-1e+10 (elapsed and "
     "scf_steps >= 0), got [1.0, nan, 0.1, 5.0] in row 3, step 0"),
]


@pytest.mark.parametrize("kind, make, field, message", [b[1:] for b in BAD],
                         ids=[b[0] for b in BAD])
def test_bad_request_is_400_naming_the_field(server, batches, kind, make, field, message):
    status, answer, _ = call(server.url, f"/v1/{kind}", make(batches[kind]))
    assert status == 400
    assert answer == {"error": message, "field": field}
    assert_still_serving(server, batches)


def test_oversized_body_is_413(server, batches):
    big = b'{"jobs": {"job_id": [' + b"1," * int(LIMIT_MB * 2**20 / 2) + b"1]}}"
    status, answer, _ = call(server.url, "/v1/runtime", big)
    assert status == 413
    assert answer == {"error": "request body over the limit of 0.5 MB (--max-body-mb)",
                      "field": "body"}
    assert_still_serving(server, batches)


def test_oversized_chunked_body_is_413(server, batches):
    """Without a Content-Length the limit is enforced while reading."""

    async def main():
        async def chunks():
            for _ in range(12):
                yield b" " * 50_000

        async with aiohttp.ClientSession() as session:
            async with session.post(server.url + "/v1/runtime", data=chunks(),
                                    headers={"Authorization": f"Bearer {TOKEN}"}) as resp:
                return resp.status, await resp.json(), resp.request_info.headers

    status, answer, sent = run_async(main())
    assert "Content-Length" not in sent
    assert status == 413 and answer["field"] == "body"
    assert_still_serving(server, batches)


@pytest.mark.parametrize("token, message", [
    (None, "missing bearer token (send 'Authorization: Bearer TOKEN')"),
    ("tok-12", "wrong bearer token"),
    ("tok-1234", "wrong bearer token"),
])
@pytest.mark.parametrize("path", ["/v1/runtime", "/v1/remaining", "/health", "/models"])
def test_token_is_required(server, batches, token, message, path):
    body = body_of(batches["remaining"]) if path.startswith("/v1/") else None
    status, answer, headers = call(server.url, path, body, token=token)
    assert status == 401
    assert answer == {"error": message, "field": "headers.Authorization"}
    assert headers["WWW-Authenticate"].startswith("Bearer")


def test_unknown_path_and_method(server, batches):
    status, answer, _ = call(server.url, "/v1/nope", b"{}")
    assert status == 404 and answer == {"error": "Not Found: POST /v1/nope", "field": None}
    status, answer, headers = call(server.url, "/v1/runtime")
    assert status == 405 and answer["error"] == "Method Not Allowed: GET /v1/runtime"
    assert headers["Allow"] == "POST"
    assert_still_serving(server, batches)


# ----------------------------------------------------------------------------- in-process server


def run_async(coro):
    return asyncio.run(coro)


async def _post(session, url, body):
    async with session.post(url, data=body) as resp:
        return resp.status, await resp.json(), resp.headers


def test_remaining_without_model_is_404(service_models, tmp_path, batches):
    shutil.copytree(service_models / "runtime", tmp_path / "runtime")
    bundle = ModelBundle.load(tmp_path)

    async def main():
        srv = await start_server(bundle)
        try:
            async with aiohttp.ClientSession() as s:
                missing = await _post(s, srv.url + "/v1/remaining", body_of(batches["remaining"]))
                ok = await _post(s, srv.url + "/v1/runtime", body_of(batches["runtime"]))
                async with s.get(srv.url + "/models") as resp:
                    info = await resp.json()
        finally:
            await srv.close()
        return missing, ok, info

    (status, answer, _), ok, info = run_async(main())
    assert status == 404 and answer["field"] == "model"
    assert answer["error"].startswith("no remaining-time model is loaded")
    assert ok[0] == 200 and ok[1]["n"] == 5
    assert info["models"]["remaining"] == {"loaded": False}


def test_excess_requests_get_503_after_queue_timeout(service_models, service_data):
    bundle = ModelBundle.load(service_models)
    body = body_of(dataset_batch(service_data, kind="remaining", n=2000))

    async def main():
        srv = await start_server(bundle, max_concurrency=1, queue_timeout_s=0.005)
        try:
            async with aiohttp.ClientSession() as s:
                return await asyncio.gather(*[_post(s, srv.url + "/v1/remaining", body)
                                              for _ in range(6)])
        finally:
            await srv.close()

    results = run_async(main())
    statuses = sorted(r[0] for r in results)
    assert set(statuses) == {200, 503}, statuses
    for status, answer, headers in results:
        if status == 503:
            assert answer["error"].startswith("server busy: 1 requests in progress")
            assert headers["Retry-After"] == "1"
        else:
            assert answer["n"] == 2000


def test_bad_limits_are_input_errors(service_models):
    from cosim.errors import InputError
    from predictors.server import make_app

    bundle = ModelBundle.load(service_models)
    with pytest.raises(InputError, match=r"^--max-concurrency: expected an integer >= 1, got 0$"):
        make_app(bundle, max_concurrency=0)
    with pytest.raises(InputError, match=r"^--max-body-mb: expected a number > 0 and <= 1024, got -1$"):
        make_app(bundle, max_body_mb=-1)
    with pytest.raises(InputError, match=r"^--token: expected a non-empty token"):
        make_app(bundle, token="")
    with pytest.raises(InputError, match=r"^--body-timeout: expected a finite number > 0"):
        make_app(bundle, body_timeout_s=0)


def test_slow_clients_cannot_starve_valid_requests(service_models, service_data):
    """12 clients trickling their bodies byte by byte while valid requests keep coming.

    Bodies are read outside the two slots, so every valid request is answered
    (200, never 503), and each trickler gets 408 once its read deadline passes.
    """
    bundle = ModelBundle.load(service_models)
    body = body_of(dataset_batch(service_data, kind="runtime", n=5))
    head = (b"POST /v1/runtime HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n")

    async def trickle(port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)

        async def drip():
            writer.write(head)
            for i in range(len(body)):      # one byte every 0.1 s: never finishes in time
                writer.write(body[i:i + 1])
                await writer.drain()
                await asyncio.sleep(0.1)

        dripping = asyncio.create_task(drip())
        try:
            status = await asyncio.wait_for(reader.readline(), 10.0)
        finally:
            dripping.cancel()
            writer.close()
        return status.split(b" ")[1].decode() if status else "closed"

    async def main():
        srv = await start_server(bundle, max_concurrency=2, queue_timeout_s=0.5,
                                 body_timeout_s=2.0)
        port = srv.port
        try:
            loop = asyncio.get_running_loop()
            slow = [asyncio.create_task(trickle(port)) for _ in range(12)]
            await asyncio.sleep(0.3)            # every trickler is inside its body
            statuses = []
            async with aiohttp.ClientSession() as s:
                stop = loop.time() + 1.2        # well inside the tricklers' 2 s deadline
                while loop.time() < stop and len(statuses) < 40:
                    statuses.append((await _post(s, srv.url + "/v1/runtime", body))[0])
            trickled = await asyncio.gather(*slow)
            async with aiohttp.ClientSession() as s:
                after = (await _post(s, srv.url + "/v1/runtime", body))[0]
        finally:
            await srv.close()
        return statuses, trickled, after

    statuses, trickled, after = run_async(main())
    assert statuses and set(statuses) == {200}, statuses
    assert trickled == ["408"] * 12
    assert after == 200


def test_body_timeout_answers_408_with_a_json_line(service_models):
    bundle = ModelBundle.load(service_models)

    async def main():
        srv = await start_server(bundle, body_timeout_s=0.3)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
            writer.write(b"POST /v1/runtime HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{")
            await writer.drain()
            raw = await asyncio.wait_for(reader.read(), 10.0)   # read to EOF: closed after
            writer.close()
        finally:
            await srv.close()
        return raw

    raw = run_async(main())
    head, _, payload = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408")
    assert json.loads(payload) == {"error": "request body not received within 0.3 s "
                                            "(--body-timeout)", "field": "body"}


# ----------------------------------------------------------------------------- shutdown


def test_sigterm_answers_in_flight_requests_and_exits_0(service_models, service_data):
    body = body_of(dataset_batch(service_data, kind="remaining", n=2000))
    srv = ServerProcess(service_models)
    url = srv.url + "/v1/remaining"
    results = []

    async def stream(session, loop):
        # a slow stream: one request at a time, a short pause between them
        while True:
            t0 = loop.time()
            try:
                status, answer, _ = await _post(session, url, body)
            except aiohttp.ClientConnectionError as exc:
                results.append((t0, loop.time(), type(exc).__name__, None))
                return
            results.append((t0, loop.time(), status, answer))
            await asyncio.sleep(0.02)

    async def slow_upload(session, signalled):
        # a request whose body is still arriving when the signal comes
        async def chunks():
            yield body[:1000]
            await signalled.wait()
            await asyncio.sleep(0.3)
            yield body[1000:]

        return await _post(session, url, chunks())

    async def main():
        loop = asyncio.get_running_loop()
        signalled = asyncio.Event()
        async with aiohttp.ClientSession() as session:
            tasks = [asyncio.create_task(stream(session, loop)) for _ in range(3)]
            upload = asyncio.create_task(slow_upload(session, signalled))
            await asyncio.sleep(1.0)
            sent = loop.time()
            srv.proc.send_signal(signal.SIGTERM)
            signalled.set()
            await asyncio.wait_for(asyncio.gather(*tasks), 60)
            uploaded = await asyncio.wait_for(upload, 60)
        return sent, uploaded, loop.time() - sent

    try:
        sent, uploaded, took = run_async(main())
        code = srv.proc.wait(30)
    finally:
        srv.stop()
    assert code == 0, srv.stderr()
    assert uploaded[0] == 200 and uploaded[1]["n"] == 2000
    assert took < 20, "shutdown waited for a timeout instead of draining"
    answered = [r for r in results if r[2] == 200]
    assert answered and all(r[3]["n"] == 2000 for r in answered)
    # nothing but answers and, once the server is gone, refused/closed connections
    failed = [r for r in results if r[2] != 200]
    assert len(failed) == 3 and all(isinstance(r[2], str) for r in failed), failed
    in_flight = [r for r in answered if r[0] < sent < r[1]]
    assert in_flight, "no request was in flight at SIGTERM"
    assert "stopping: finishing" in srv.stderr()


# ----------------------------------------------------------------------------- CLI


def test_serve_defaults_to_loopback():
    args = build_parser().parse_args(["serve", "--models", "m"])
    assert (args.host, args.port, args.token, args.max_body_mb, args.max_concurrency) == (
        "127.0.0.1", 8080, None, 64.0, 8)


def test_serve_cli_user_errors(tmp_path, service_models, capsys):
    assert main(["serve", "--models", str(tmp_path / "none"), "--port", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "runtime" in err

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["serve", "--models", str(service_models), "--port", str(port)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"error: --host/--port: expected an address this machine can listen "
                          f"on and a free port, got 127.0.0.1:{port} (")

    for bad in (["--max-body-mb", "0"], ["--port", "70000"], ["--max-concurrency", "-1"]):
        with pytest.raises(SystemExit) as info:
            main(["serve", "--models", str(service_models), *bad])
        assert info.value.code == 2
    assert "expected" in capsys.readouterr().err


def test_clients_that_give_up_leave_no_traceback(server, batches):
    """One closes the connection halfway through its body, one times out waiting."""
    before = server.stderr()

    async def main():
        host, port = server.url.split("//")[1].rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(b"POST /v1/runtime HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Authorization: Bearer " + TOKEN.encode() + b"\r\n"
                     b"Content-Length: 100000\r\n\r\n" + b'{"jobs": {"job_id": [1,')
        await writer.drain()
        await asyncio.sleep(0.2)
        writer.close()
        big = body_of({k: v * 200 for k, v in batches["remaining"].items()})
        try:
            async with aiohttp.ClientSession() as session:
                async with session.post(server.url + "/v1/remaining", data=big,
                                        headers={"Authorization": f"Bearer {TOKEN}"},
                                        timeout=aiohttp.ClientTimeout(total=0.05)) as resp:
                    await resp.read()
        except (TimeoutError, aiohttp.ClientError):
            pass
        await asyncio.sleep(1.0)

    run_async(main())
    assert_still_serving(server, batches)
    new = server.stderr()[len(before):]
    assert "Traceback" not in new and "ERROR" not in new
    assert "client gone during POST /v1/runtime (ConnectionResetError)" in new
