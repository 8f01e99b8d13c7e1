"""The load generator's pure parts: distributions, mixes, SigV4, summaries from records."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from storlab.campaign.runners.objload import (
    LoadError,
    LoadSpec,
    Target,
    _Conn,
    parse_op_mix,
    parse_sizes,
    summarize,
    time_series,
)


def test_size_and_mix_parsing():
    assert parse_sizes("16k:0.8,1MiB:0.2") == {16384: 0.8, 1 << 20: 0.2}
    assert parse_sizes(4096) == {4096: 1.0}
    assert parse_sizes({"4k": 1, "4096": 1}) == {4096: 1.0}
    assert parse_op_mix("get:70,put:30") == pytest.approx({"get": 0.7, "put": 0.3, "delete": 0})
    for bad in ("get:-1", "list:1", {"get": 0}):
        with pytest.raises(LoadError):
            parse_op_mix(bad)
    with pytest.raises(LoadError, match="not a size"):
        parse_sizes("16 parsecs")


def test_spec_normalises_mix_and_sizes():
    spec = LoadSpec(mix={"get": 1.0}, sizes={"16k": 3, 4096: 1})
    assert spec.mix == {"get": 1.0, "put": 0.0, "delete": 0.0}
    assert spec.sizes == {16384: 0.75, 4096: 0.25}
    assert LoadSpec(mix=spec.mix, sizes=spec.sizes).mix == spec.mix


def test_spec_and_target_checks():
    with pytest.raises(LoadError, match="rate"):
        LoadSpec(mode="open")
    with pytest.raises(LoadError, match="loopback or private"):
        Target(api="s3", endpoint="http://93.184.215.14:80", access_key="a", secret_key="b")
    # a private address (a cluster bound to a namespace LAN's root end) is a target
    Target(api="s3", endpoint="http://10.77.3.1:80", access_key="a", secret_key="b")
    with pytest.raises(LoadError, match="missing"):
        Target(api="swift", auth_url="http://127.0.0.1:8080/auth/v1.0")


def test_one_reading_of_a_target_url():
    """The client and the runner's endpoint check read a URL by one function: https's own
    port is 443 (the check said 443, the client went to 80); a scheme the client does not
    speak or a port that is not one is refused in one line."""
    from storlab.campaign.runners.objload import url_address

    assert url_address("https://H") == ("https", "h", 443)
    assert url_address("http://h") == ("http", "h", 80)
    assert url_address("http://h:8080/auth/v1.0") == ("http", "h", 8080)
    for url, words in [("ftp://127.0.0.1", "scheme must be http or https"),
                       ("127.0.0.1:80", "scheme must be http or https"),
                       ("http://127.0.0.1:80x", "port must be a number"),
                       ("http://127.0.0.1:99999", "port must be a number"),
                       ("http://:80", "no host")]:
        with pytest.raises(LoadError, match=words):
            url_address(url)
        with pytest.raises(LoadError, match=words):
            Target(api="s3", endpoint=url, access_key="a", secret_key="b")


def test_sigv4_matches_an_independent_derivation():
    """The AWS documentation's signing-key example (secret, 20120215, us-east-1, iam)
    checks the key chain; the request signature is then recomputed by hand."""
    import hashlib
    import hmac

    t = Target(api="s3", endpoint="http://127.0.0.1:9000", access_key="AKID",
               secret_key="wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", region="us-east-1")
    c = _Conn(t, None)
    k = c._signing_key("20120215")
    # the documented key is for service "iam"; ours is "s3": derive both the same way
    ref = ("AWS4" + t.secret_key).encode()
    for part in ("20120215", "us-east-1", "s3", "aws4_request"):
        ref = hmac.new(ref, part.encode(), hashlib.sha256).digest()
    assert k == ref
    iam = ("AWS4" + t.secret_key).encode()
    for part in ("20120215", "us-east-1", "iam", "aws4_request"):
        iam = hmac.new(iam, part.encode(), hashlib.sha256).digest()
    assert iam.hex() == "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d"
    h = c._headers("PUT", "/b/k", b"x")
    assert h["x-amz-content-sha256"] == "UNSIGNED-PAYLOAD"
    assert h["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKID/")
    assert "SignedHeaders=host;x-amz-content-sha256;x-amz-date" in h["Authorization"]


def _records(n: int = 1000, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    t_start = np.sort(rng.uniform(0, 10, n))
    lat = rng.exponential(0.02, n)
    op = rng.choice(["get", "put"], n, p=[0.75, 0.25])
    status = np.where(op == "get", 200, 201)
    status[::100] = 503
    return pd.DataFrame({"t_sched": t_start, "t_start": t_start, "t_end": t_start + lat,
                         "op": op, "size": 4096, "status": status, "worker": 0})


def test_summary_from_records():
    rec = _records()
    s = summarize(rec)
    ok = rec[rec["status"] < 300]
    span = rec["t_end"].max() - rec["t_sched"].min()
    assert s["errors"] == 10 and s["requests"] == 1000
    assert s["ops_per_s"] == pytest.approx(len(ok) / span)
    g = ok[ok["op"] == "get"]
    assert s["get_lat_p99_ms"] == pytest.approx(np.percentile((g.t_end - g.t_start) * 1e3, 99))
    assert s["read_iops"] == s["get_ops_per_s"] and s["write_iops"] == s["put_ops_per_s"]
    assert s["mb_per_s"] == pytest.approx(len(ok) * 4096 / 1e6 / span)
    assert math.isnan(s["delete_lat_p50_ms"])
    # the warm-up cut drops the first seconds
    assert summarize(rec, warmup=5)["requests"] == (rec["t_sched"] >= 5).sum()


def test_time_series_counts_every_ok_request():
    rec = _records()
    ts = time_series(rec, 1.0)
    assert ts["ops_per_s"].sum() == (rec["status"] < 300).sum()
    assert set(ts["op"]) == {"get", "put"}


def test_a_request_that_raises_leaves_no_deadline_armed():
    """An exception the request does not turn into a status (here http.client's ValueError
    for a header value with a line break, raised before any connection) still disarms the
    request's deadline: the entry was left armed for ever, holding its connection."""
    from storlab.campaign.runners.objload import _DEADLINES

    t = Target(api="swift", auth_url="http://127.0.0.1:9/auth/v1.0", user="u", key="k",
               bucket="b")
    c = _Conn(t, ("http://127.0.0.1:9/v1/AUTH_u", "tk\r\nX-Injected: 1"))
    with pytest.raises(ValueError):
        c.request("GET", "o", None, 5.0, bytearray(16))
    assert c.conn is not None and c.conn.sock is None  # it never connected
    assert all(conn is not c.conn for _, conn in _DEADLINES.armed.values())
