"""Prediction service: in-process and HTTP backends, batch checks, errors, exact floats."""

from __future__ import annotations

import asyncio
import json
import math
import socket

import numpy as np
import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from cosim.errors import InputError
from predictors.bundle import ModelBundle
from predictors.server import ServerProcess
from predictors.service import (
    BatchError,
    BatchRejected,
    HttpService,
    InProcessService,
    ModelNotLoaded,
    Prediction,
    PredictionService,
    ServiceError,
    ServiceHTTPError,
    ServiceResponseError,
    ServiceTimeout,
    ServiceUnavailable,
    dataset_batch,
    encode_batch,
    make_service,
    required_columns,
    validate_batch,
)

# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def bundle(service_models):
    return ModelBundle.load(service_models)


@pytest.fixture(scope="module")
def server(service_models):
    with ServerProcess(service_models, "--token", "s3cret") as srv:
        yield srv


def run(coro):
    return asyncio.run(coro)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ----------------------------------------------------------------------------- batch checks

NAMES = ["cores", "ENCUT", "PREC"]
CATS = ["PREC"]


def good(**changes):
    batch = {"job_id": [1, "b"], "user": ["u1", "u2"], "cores": [4, 8], "ENCUT": [400.0, None],
             "PREC": ["Normal", ""], "elapsed": [10.0, 0.0], "scf_done": [3, 0],
             "prerun": [100.0, 50.5], "progress": [[[5.0, -0.1, 0.3, 12]], []]}
    batch.update(changes)
    return batch


def check(batch, kind="runtime", **kw):
    return validate_batch(batch, kind=kind, feature_names=NAMES, categorical=CATS, **kw)


def test_validate_accepts_good_batches():
    assert check(good()) == 2
    assert check(good(), kind="remaining") == 2
    # extra columns are ignored, remaining columns are not needed for runtime
    assert check({"job_id": [], "cores": [], "ENCUT": [], "PREC": []}) == 0
    # in-process callers may pass numpy arrays and numpy scalars
    assert check(good(cores=np.array([4, 8]), ENCUT=[np.float64(1.5), np.int64(2)],
                      progress=[np.zeros((2, 4)), np.zeros((0, 4))]), kind="remaining") == 2


@pytest.mark.parametrize("batch, kind, message", [
    ([1, 2], "runtime", "jobs: expected an object mapping column names to lists, got a list"),
    (good(ENCUT=None) | {"ENCUT": None}, "runtime",
     "jobs.ENCUT: expected a list with one value per job, got null"),
    ({k: v for k, v in good().items() if k != "ENCUT"}, "runtime",
     "jobs.ENCUT: expected a column with one value per job, got no such column"),
    ({k: v for k, v in good().items() if k != "job_id"}, "runtime",
     "jobs.job_id: expected a column with one value per job, got no such column"),
    (good(ENCUT=[1.0, 2.0, 3.0]), "runtime",
     "jobs.ENCUT: expected 2 values, one per job like jobs.job_id, got 3 values"),
    (good(ENCUT=[400.0, "high"]), "runtime",
     'jobs.ENCUT: expected numbers (null for unknown), got "high" (a string) in row 1'),
    (good(cores=[True, 8]), "runtime",
     "jobs.cores: expected numbers (null for unknown), got true (a boolean) in row 0"),
    (good(PREC=[[1], "Normal"]), "runtime",
     "jobs.PREC: expected strings (or numbers, null for unknown), got [1] (a list) in row 0"),
    (good(job_id=[1.5, 2]), "runtime",
     "jobs.job_id: expected strings or integers, got 1.5 (a number) in row 0"),
    (good(elapsed=[-1.0, 2.0]), "remaining",
     "jobs.elapsed: expected numbers in [0, 1e+10], got -1.0 in row 0"),
    (good(prerun=[1.0, float("nan")]), "remaining",
     "jobs.prerun: expected finite numbers in [0, 1e+10], got nan in row 1"),
    (good(scf_done=[None, 1]), "remaining", "jobs.scf_done: expected numbers, got null in row 0"),
    ({k: v for k, v in good().items() if k != "progress"}, "remaining",
     "jobs.progress: expected a column with one value per job, got no such column"),
    (good(progress=[[[1.0, 2.0, 3.0]], []]), "remaining",
     "jobs.progress: expected per job a list of rows [elapsed, denergy, max_force, scf_steps] "
     "of numbers, got [1.0, 2.0, 3.0] in row 0, step 0"),
    (good(progress=[[], [[1.0, "x", 3.0, 4]]]), "remaining",
     "jobs.progress: expected per job a list of rows [elapsed, denergy, max_force, scf_steps] "
     'of numbers, got "x" (a string) in row 1, step 0'),
    (good(progress=[[], 7]), "remaining",
     "jobs.progress: expected per job a list of rows [elapsed, denergy, max_force, scf_steps] "
     "of numbers, got 7 (a number) in row 1"),
])
def test_validate_names_the_bad_field(batch, kind, message):
    with pytest.raises(BatchError) as info:
        check(batch, kind=kind)
    assert str(info.value) == message
    assert info.value.field == message.split(":")[0]
    assert isinstance(info.value, InputError)


def test_validate_batch_size_limit():
    assert check(good(), max_batch=2) == 2
    with pytest.raises(BatchError, match=r"^jobs.job_id: expected at most 1 jobs per call, "
                                         r"got 2 jobs; split the batch$"):
        check(good(), max_batch=1)


def test_required_columns():
    assert required_columns("runtime", NAMES) == ["job_id", "cores", "ENCUT", "PREC"]
    assert required_columns("remaining", NAMES) == ["job_id", "cores", "ENCUT", "PREC", "elapsed",
                                                    "scf_done", "prerun", "progress"]


@given(st.lists(st.integers(0, 6), min_size=3, max_size=3))
def test_validate_lengths_property(lengths):
    """A batch is accepted exactly when all its required columns have job_id's length."""
    batch = {"job_id": list(range(lengths[0])), "cores": [1] * lengths[1],
             "ENCUT": [2.5] * lengths[2], "PREC": ["Low"] * lengths[0]}
    if len(set(lengths)) == 1:
        assert check(batch) == lengths[0]
    else:
        with pytest.raises(BatchError, match="one per job like jobs.job_id"):
            check(batch)


@settings(max_examples=200)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=20))
def test_json_body_round_trips_floats_exactly(values):
    """The request body carries every double bit for bit (NaN and infinities included)."""
    body = encode_batch({"job_id": list(range(len(values))), "x": np.asarray(values)})
    back = np.asarray(json.loads(body)["jobs"]["x"], dtype=np.float64)
    assert back.tobytes() == np.asarray(values, dtype=np.float64).tobytes() or all(
        (math.isnan(a) and math.isnan(b)) or a == b for a, b in zip(back, values))


# ----------------------------------------------------------------------------- in process


def test_inprocess_matches_bundle(bundle, service_data):
    rb = dataset_batch(service_data, kind="runtime", n=30)
    mb = dataset_batch(service_data, kind="remaining", n=30)

    async def main():
        async with InProcessService(bundle) as svc:
            assert isinstance(svc, PredictionService)
            return await svc.runtime(rb), await svc.remaining(mb), await svc.health()

    rt, rem, health = run(main())
    assert isinstance(rt, Prediction) and rt.values.dtype == np.float64
    assert np.array_equal(rt.values, bundle.runtime(rb)[0])
    assert np.array_equal(rem.values, bundle.remaining(mb)[0])
    assert rt.model_version == rem.model_version == bundle.version
    assert rt.seconds > 0 and rem.seconds > 0
    assert np.all(rt.values >= 0) and len(rem.values) == 30
    assert health == {"status": "ok", "model_version": bundle.version}


def test_inprocess_offload_gives_the_same_answers(bundle, service_data):
    mb = dataset_batch(service_data, kind="remaining", n=20)

    async def main(offload):
        async with InProcessService(bundle, offload=offload) as svc:
            return await svc.remaining(mb)

    assert run(main(True)).values.tobytes() == run(main(False)).values.tobytes()


def test_inprocess_empty_batch(bundle, service_data):
    empty = {k: [] for k in dataset_batch(service_data, kind="remaining", n=1)}

    async def main():
        async with InProcessService(bundle) as svc:
            return await svc.runtime(empty), await svc.remaining(empty)

    for answer in run(main()):
        assert answer.values.shape == (0,) and answer.model_version == bundle.version


def test_inprocess_rejects_bad_batch_with_field(bundle, service_data):
    rb = dataset_batch(service_data, kind="runtime", n=3)
    rb["ENCUT"][1] = "high"

    async def main(validate):
        async with InProcessService(bundle, validate=validate) as svc:
            await svc.runtime(rb)

    with pytest.raises(BatchRejected) as info:
        run(main(True))
    assert info.value.field == "jobs.ENCUT" and info.value.reason == "rejected"
    assert str(info.value) == ('jobs.ENCUT: expected numbers (null for unknown), '
                               'got "high" (a string) in row 1')
    # unchecked, the model's own check refuses it: still a rejected batch, not a crash
    with pytest.raises(BatchRejected, match="the runtime model rejected the batch: .*'high'"):
        run(main(False))


def test_inprocess_without_remaining_model(bundle, service_data):
    only_runtime = ModelBundle(bundle.runtime_model, None, bundle.spec, "v-rt")
    mb = dataset_batch(service_data, kind="remaining", n=2)

    async def main():
        async with InProcessService(only_runtime) as svc:
            info = await svc.models()
            assert info["models"]["remaining"] == {"loaded": False}
            assert info["models"]["runtime"]["loaded"] is True
            await svc.remaining(mb)

    with pytest.raises(ModelNotLoaded, match="no remaining-time model"):
        run(main())


def test_closed_service_refuses(bundle, service_data):
    rb = dataset_batch(service_data, kind="runtime", n=1)

    async def main():
        svc = InProcessService(bundle)
        await svc.close()
        await svc.runtime(rb)

    with pytest.raises(ServiceError, match="closed"):
        run(main())


def test_make_service(service_models, bundle):
    svc = make_service("inprocess", models_dir=service_models)
    assert isinstance(svc, InProcessService) and svc.bundle.version == bundle.version
    assert make_service("inprocess", bundle=bundle).bundle is bundle
    http = make_service("http", url="http://127.0.0.1:1/", timeout_s=1.5, token="t")
    assert isinstance(http, HttpService) and http.url == "http://127.0.0.1:1"
    with pytest.raises(InputError, match=r"^prediction_service.backend: expected 'inprocess' or "
                                         r"'http', got 'grpc'$"):
        make_service("grpc")
    with pytest.raises(InputError, match="^prediction_service.url: expected the server URL"):
        make_service("http")
    with pytest.raises(InputError, match="^prediction_service.models_dir: expected a models"):
        make_service("inprocess")
    with pytest.raises(InputError, match="^prediction_service.url: expected an http"):
        HttpService("127.0.0.1:8080")
    with pytest.raises(InputError, match="^prediction_service.timeout_s: expected a number > 0"):
        HttpService("http://x", timeout_s=0)


# ----------------------------------------------------------------------------- over HTTP


def test_http_is_bit_identical_to_inprocess(server, bundle, service_data):
    rb = dataset_batch(service_data, kind="runtime", n=150)
    mb = dataset_batch(service_data, kind="remaining", n=150, fraction=0.7)
    # numpy columns are sent as JSON lists
    mb_np = dict(mb, elapsed=np.asarray(mb["elapsed"]), scf_done=np.asarray(mb["scf_done"]))

    async def main():
        async with InProcessService(bundle) as local, \
                HttpService(server.url, token="s3cret", timeout_s=30) as remote:
            pairs = []
            for kind, batch in (("runtime", rb), ("remaining", mb), ("remaining", mb_np)):
                pairs.append((await getattr(local, kind)(batch),
                              await getattr(remote, kind)(batch)))
            return pairs

    for here, there in run(main()):
        assert there.values.dtype == np.float64 and there.values.shape == (150,)
        assert there.values.tobytes() == here.values.tobytes()
        assert there.model_version == here.model_version == bundle.version
        assert there.seconds > 0


def test_http_health_models_and_errors(server, bundle, service_data):
    rb = dataset_batch(service_data, kind="runtime", n=4)
    bad = dict(rb, cores=rb["cores"][:3])

    async def main():
        async with HttpService(server.url, token="s3cret") as svc:
            health = await svc.health()
            models = await svc.models()
            with pytest.raises(BatchRejected) as rejected:
                await svc.runtime(bad)
            answer = await svc.runtime(rb)   # still serving
        async with HttpService(server.url, token="wrong") as svc:
            with pytest.raises(ServiceHTTPError) as denied:
                await svc.runtime(rb)
        return health, models, rejected.value, answer, denied.value

    health, models, rejected, answer, denied = run(main())
    assert health["status"] == "ok" and health["model_version"] == bundle.version
    assert models["feature_names"] == bundle.feature_names
    assert models["models"]["remaining"]["loaded"] is True
    assert rejected.status == 400 and rejected.field == "jobs.cores"
    assert "jobs.cores: expected 4 values, one per job like jobs.job_id, got 3 values" in str(
        rejected)
    assert len(answer.values) == 4
    assert denied.status == 401 and denied.reason == "http 401"


def test_http_connection_refused():
    async def main():
        async with HttpService(f"http://127.0.0.1:{free_port()}", timeout_s=2) as svc:
            await svc.health()

    with pytest.raises(ServiceUnavailable) as info:
        run(main())
    assert info.value.reason == "unavailable" and info.value.status is None


def test_http_timeout():
    """A peer that accepts and never answers: the call fails after timeout_s."""

    async def main():
        async def silent(reader, writer):
            await reader.read(1 << 16)
            await asyncio.sleep(5)
            writer.close()

        listener = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = listener.sockets[0].getsockname()[1]
        try:
            async with HttpService(f"http://127.0.0.1:{port}", timeout_s=0.3) as svc:
                loop = asyncio.get_running_loop()
                t0 = loop.time()
                with pytest.raises(ServiceTimeout, match="no answer within 0.3 s"):
                    await svc.runtime({"job_id": [1]})
                return loop.time() - t0
        finally:
            listener.close()

    assert 0.25 < run(main()) < 3.0


@pytest.mark.parametrize("payload, status, error", [
    (b"not json", 200, ServiceResponseError),
    (b'{"predictions": [1.0], "model_version": "v", "n": 1}', 200, ServiceResponseError),
    (b'{"predictions": ["a", "b"], "model_version": "v", "n": 2}', 200, ServiceResponseError),
    (b'{"error": "busy", "field": null}', 503, ServiceUnavailable),
    (b'{"error": "no remaining-time model", "field": "model"}', 404, ModelNotLoaded),
    (b"<html>oops</html>", 500, ServiceHTTPError),
])
def test_http_bad_answers_are_service_errors(payload, status, error):
    """Answers our server never gives, from a minimal peer: each maps to a ServiceError."""

    async def main():
        async def reply(request):
            await request.read()
            return web.Response(body=payload, status=status, content_type="application/json")

        app = web.Application()
        app.router.add_post("/v1/runtime", reply)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        try:
            async with HttpService(f"http://127.0.0.1:{port}") as svc:
                await svc.runtime({"job_id": [1, 2]})
        finally:
            await runner.cleanup()

    with pytest.raises(error) as info:
        run(main())
    assert isinstance(info.value, ServiceError)
    if status != 200:
        assert info.value.status == status


# ----------------------------------------------------------------------------- circuit breaker


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_breaker_opens_after_failures_then_probes():
    """Hand-checked sequence: 3 failures open it for 10 s, one probe, a failed probe reopens."""
    from predictors.service import CircuitBreaker, CircuitOpen

    clock = FakeClock()
    b = CircuitBreaker(failures=3, cooldown_s=10.0, clock=clock)
    for _ in range(2):
        b.before_call()
        b.failure()
    assert b.state == "closed"
    b.before_call()
    b.failure()
    assert b.state == "open" and b.opened == 1
    clock.now = 9.9
    with pytest.raises(CircuitOpen, match=r"^3 calls in a row failed; not calling the service "
                                          r"for 0\.1 s more") as info:
        b.before_call()
    assert info.value.reason == "circuit open" and isinstance(info.value, ServiceUnavailable)
    clock.now = 10.0
    assert b.state == "half-open"
    b.before_call()                       # the probe goes through ...
    with pytest.raises(CircuitOpen):
        b.before_call()                   # ... and only the probe
    b.failure()                           # failed probe: open for another cool-down
    assert b.state == "open" and b.opened == 1
    clock.now = 19.9
    with pytest.raises(CircuitOpen):
        b.before_call()
    clock.now = 20.0
    b.before_call()
    b.success()                           # answered probe: closed, count reset
    assert b.state == "closed"
    for _ in range(2):
        b.before_call()
        b.failure()
    assert b.state == "closed" and b.refused == 3


@pytest.mark.parametrize("kwargs, message", [
    ({"failures": 0}, "breaker failures: expected an integer >= 1, got 0"),
    ({"cooldown_s": -1}, "breaker cooldown_s: expected a number >= 0, got -1"),
])
def test_breaker_bad_settings(kwargs, message):
    from predictors.service import CircuitBreaker

    with pytest.raises(InputError, match=f"^{message}$"):
        CircuitBreaker(**kwargs)


def test_hung_server_costs_three_timeouts_not_every_call():
    """A peer that accepts and never answers: 3 calls wait the timeout, the other 47 fall
    back at once; after the cool-down one probe goes out (and waits) again."""
    from predictors.service import CircuitBreaker, CircuitOpen

    clock = FakeClock()

    async def main():
        seen = []

        async def silent(reader, writer):
            while data := await reader.read(1 << 16):
                seen.append(data.count(b"POST /v1/runtime"))
            writer.close()

        listener = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = listener.sockets[0].getsockname()[1]
        reasons = []
        breaker = CircuitBreaker(failures=3, cooldown_s=30.0, clock=clock)
        try:
            async with HttpService(f"http://127.0.0.1:{port}", timeout_s=0.2,
                                   breaker=breaker) as svc:
                for i in range(52):
                    if i == 50:
                        clock.now = 30.0          # cool-down over: the next call probes
                    try:
                        await svc.runtime({"job_id": [1]})
                    except ServiceError as exc:
                        reasons.append(exc.reason)
                        if exc.reason == "circuit open":
                            assert isinstance(exc, CircuitOpen)
        finally:
            listener.close()
        return reasons, sum(seen)

    reasons, sent = run(main())
    assert reasons == ["timeout"] * 3 + ["circuit open"] * 47 + ["timeout", "circuit open"]
    assert sent == 4


def test_answers_keep_the_breaker_closed():
    """400 answers come from a live server: they never open the breaker."""

    async def main():
        async def reply(request):
            await request.read()
            return web.json_response({"error": "bad", "field": "jobs"}, status=400)

        app = web.Application()
        app.router.add_post("/v1/runtime", reply)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        port = runner.addresses[0][1]
        reasons = []
        try:
            async with HttpService(f"http://127.0.0.1:{port}") as svc:
                for _ in range(6):
                    try:
                        await svc.runtime({"job_id": [1]})
                    except ServiceError as exc:
                        reasons.append(exc.reason)
                state = svc.breaker.state
        finally:
            await runner.cleanup()
        return reasons, state

    reasons, state = run(main())
    assert reasons == ["rejected"] * 6 and state == "closed"


def test_fallback_line():
    from predictors.service import fallback_line

    assert fallback_line("fcfs+easy@rnn", {"prediction_fallbacks": 0}) is None
    assert fallback_line("sjf+easy@rnn", {
        "prediction_fallbacks": 50, "prediction_batches": 120,
        "prediction_fallback_reasons": {"timeout": 3, "circuit open": 47}}) == (
        "warning: sjf+easy@rnn: 50 of 120 prediction batches used user estimates instead "
        "(circuit open 47, timeout 3)")
