"""An object-store load generator on the standard library: S3 (SigV4, path style) and
Swift (tempauth v1) over persistent `http.client` connections, one per client thread.

What it does (after COSBench's stages and warp's per-request records):
- prepare: create the bucket/container and write the objects GETs will read (skipped when a
  marker object says the same set is already there);
- main: closed loop (N clients, each issues its next request when the last one answered) or
  open loop (requests arrive at a target rate, Poisson or uniform; N clients serve them and
  the latency counts from the scheduled arrival, so a slow server cannot hide queueing);
- an operation mix (PUT/GET/DELETE weights) and an object size distribution;
- stops after a duration or a request count; every request is recorded.

Why not boto3: it is GIL-bound and costs ~0.8 core at a few hundred ops/s here
(notes/real-systems.md 4), which would make the client the bottleneck; SigV4 is ~30 lines.
Payloads are unique per request (a counter in the first bytes; Garage-style dedup).

A campaign's run starts it as a child process in the run's sandbox (`main`, `python -m
storlab.campaign.runners.objload`: its configuration, credentials included, as JSON on
stdin); that child does without pandas (`load_rows`, `rows_to_csv`: a start costs the
interpreter and numpy only), the summary is made by storlab from the records it wrote.
"""

from __future__ import annotations

import datetime as _dt
import gzip
import hashlib
import hmac
import http.client
import io
import itertools
import json
import math
import os
import queue
import random
import sys
import threading
import time
import urllib.parse
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from ... import units
from ...clusters.netns import is_lan_address
from ...errors import LoadError, StorlabError, UnitsError

if TYPE_CHECKING:
    import pandas as pd

OPS = ("get", "put", "delete")
RECORD_COLUMNS = ("t_sched", "t_start", "t_end", "op", "size", "status", "worker")
#: A record's status when no HTTP answer came: the connection failed, or no answer within
#: the request timeout (not retried: a dead server must cost one timeout, not two).
CONN_ERROR, TIMED_OUT = 0, 1


def status_text(status: int, timeout: float) -> str:
    """An HTTP status, or what happened instead, for a message."""
    if status == CONN_ERROR:
        return "a connection error (nothing listening, or the connection was dropped)"
    if status == TIMED_OUT:
        return f"no answer within {timeout:g} s (timeout)"
    return f"HTTP {status}"


def parse_size(v: Any) -> int:
    """An object size (4096, "16k", "16KiB", "1MiB") as bytes (`storlab.units` grammar)."""
    try:
        return units.parse_size(v, "object size")
    except UnitsError as exc:
        raise LoadError(str(exc)) from None


def parse_sizes(spec: Any) -> dict[int, float]:
    """An object size distribution: one size, {size: weight}, or "16k:0.8,1m:0.2"."""
    try:
        return units.parse_size_mix(spec, "object size distribution")
    except UnitsError as exc:
        raise LoadError(str(exc)) from None


def parse_op_mix(spec: Any) -> dict[str, float]:
    """{get: 70, put: 30} or "get:70,put:30" -> normalised weights over OPS."""
    try:
        return units.parse_op_mix(spec, OPS)
    except UnitsError as exc:
        raise LoadError(str(exc)) from None


@dataclass
class Target:
    """Where the load goes. api "s3": endpoint + keys; api "swift": auth_url + user/key."""

    api: str = "s3"
    endpoint: str = ""
    access_key: str = ""
    secret_key: str = ""
    region: str = "us-east-1"
    auth_url: str = ""
    user: str = ""
    key: str = ""
    bucket: str = "storlab"
    unsigned_payload: bool = True

    def __post_init__(self) -> None:
        if self.api not in ("s3", "swift"):
            raise LoadError(f"api {self.api!r} must be s3 or swift")
        need = ("endpoint", "access_key", "secret_key") if self.api == "s3" else (
            "auth_url", "user", "key")
        missing = [n for n in need if not getattr(self, n)]
        if missing:
            raise LoadError(f"api {self.api}: missing {', '.join(missing)}")
        for url in (self.endpoint, self.auth_url):
            host = url_address(url)[1] if url else None
            if host is not None and not is_lan_address(host):
                raise LoadError(f"target {url}: only loopback or private (RFC 1918) "
                                "endpoints are allowed")


def url_address(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) an http or https URL's requests go to, the scheme's port when
    none is written: the one reading of a URL, for the client and for the runner's check
    that the load goes to the cluster's own endpoint. Another scheme, no host or a port
    that is not a number 0-65535 is refused (LoadError)."""
    u = urllib.parse.urlsplit(str(url))
    if u.scheme not in ("http", "https"):
        raise LoadError(f"target {url}: the scheme must be http or https")
    try:
        port = u.port
    except ValueError:
        raise LoadError(f"target {url}: the port must be a number from 0 to 65535") from None
    if not u.hostname:
        raise LoadError(f"target {url}: no host")
    return u.scheme, u.hostname, port or (443 if u.scheme == "https" else 80)


def _connection(scheme: str, host: str, port: int, timeout: float
                ) -> http.client.HTTPConnection:
    """A connection to (scheme, host, port) as `url_address` reads a URL."""
    cls = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
    return cls(host, port, timeout=timeout)


@dataclass
class LoadSpec:
    mode: str = "closed"  # closed | open
    clients: int = 8
    rate: float | None = None  # open loop: requests per second
    arrivals: str = "poisson"  # open loop: poisson | uniform
    mix: dict[str, float] = field(default_factory=lambda: {"get": 1.0})
    sizes: dict[int, float] = field(default_factory=lambda: {16384: 1.0})
    duration: float | None = 10.0
    requests: int | None = None
    objects: int = 200  # key space: prepared objects GETs read, PUTs overwrite
    put_keys: str = "overwrite"  # overwrite (bounded space) | new (fresh names)
    prepare: str = "auto"  # auto | always | never
    warmup: float = 0.0  # seconds at the start left out of the summary
    seed: int = 0
    timeout: float = 30.0  # per request

    def __post_init__(self) -> None:
        if self.mode not in ("closed", "open"):
            raise LoadError(f"mode {self.mode!r} must be closed or open")
        if self.mode == "open" and not (self.rate and self.rate > 0):
            raise LoadError("open loop needs a positive rate (requests per second)")
        if self.arrivals not in ("poisson", "uniform"):
            raise LoadError(f"arrivals {self.arrivals!r} must be poisson or uniform")
        if not 1 <= int(self.clients) <= 512:
            raise LoadError(f"clients {self.clients} must be between 1 and 512")
        if self.duration is None and self.requests is None:
            raise LoadError("give a duration or a request count")
        if self.duration is not None and not 0 < self.duration <= 3600:
            raise LoadError(f"duration {self.duration} must be in (0, 3600] seconds")
        if self.requests is not None and self.requests < 1:
            raise LoadError("requests must be at least 1")
        if self.put_keys not in ("overwrite", "new"):
            raise LoadError(f"put_keys {self.put_keys!r} must be overwrite or new")
        if self.prepare not in ("auto", "always", "never"):
            raise LoadError(f"prepare {self.prepare!r} must be auto, always or never")
        if self.objects < 1:
            raise LoadError("objects must be at least 1")
        self.mix = parse_op_mix(self.mix)  # both idempotent: normalised in, same out
        self.sizes = parse_sizes(self.sizes)


# ----------------------------------------------------------------------------- deadlines
class _Deadlines:
    """Every request's whole time bounded by its timeout, whatever the server does: a
    socket timeout bounds one recv only, so a server dripping a byte a second (headers or
    body) held a load past its duration for ever. One thread per process watches the
    armed connections and shuts a socket down once its request's time is up (at most
    `TICK` late); the blocked recv then returns and the request counts as timed out.
    Each request disarms its token once, in a `finally`, and learns there whether its
    deadline cut it short; tokens are drawn from a counter, never reused."""

    TICK = 0.05

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.armed: dict[int, tuple[float, http.client.HTTPConnection]] = {}
        self.fired: set[int] = set()
        self.thread: threading.Thread | None = None
        self.tokens = itertools.count(1)

    def arm(self, conn: http.client.HTTPConnection, seconds: float) -> int:
        """Watch `conn` for `seconds` from now; a token for `disarm`."""
        with self.lock:
            token = next(self.tokens)
            self.armed[token] = (time.monotonic() + seconds, conn)
            self.fired.discard(token)
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._watch, daemon=True,
                                               name="objload-deadlines")
                self.thread.start()
        return token

    def disarm(self, token: int) -> bool:
        """Stop watching; whether the deadline had passed (the socket was shut down)."""
        with self.lock:
            self.armed.pop(token, None)
            if token in self.fired:
                self.fired.discard(token)
                return True
        return False

    def _watch(self) -> None:
        import socket

        while True:
            time.sleep(self.TICK)
            now = time.monotonic()
            with self.lock:
                due = [(t, c) for t, (end, c) in self.armed.items() if end <= now]
                for t, c in due:
                    sock = c.sock
                    if sock is None:  # still connecting: its own timeout bounds that
                        continue  # (every request disarms in a `finally`: none is left)
                    self.armed.pop(t)
                    self.fired.add(t)
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass


_DEADLINES = _Deadlines()


# ----------------------------------------------------------------------------- protocol
class _Conn:
    """One persistent connection speaking S3 or Swift; reconnects after an error."""

    def __init__(self, target: Target, swift_auth: tuple[str, str] | None) -> None:
        self.t = target
        if target.api == "s3":
            self.scheme, self.host, self.port = url_address(target.endpoint)
            self.prefix = ""
        else:
            assert swift_auth is not None
            self.scheme, self.host, self.port = url_address(swift_auth[0])
            self.prefix = urllib.parse.urlsplit(swift_auth[0]).path.rstrip("/")
            self.token = swift_auth[1]
        self.hostport = f"{self.host}:{self.port}"
        self.conn: http.client.HTTPConnection | None = None
        self._keys: dict[str, bytes] = {}

    def _signing_key(self, day: str) -> bytes:
        k = self._keys.get(day)
        if k is None:
            k = ("AWS4" + self.t.secret_key).encode()
            for part in (day, self.t.region, "s3", "aws4_request"):
                k = hmac.new(k, part.encode(), hashlib.sha256).digest()
            self._keys = {day: k}
        return k

    def _headers(self, method: str, path: str, body: bytes | None) -> dict[str, str]:
        if self.t.api == "swift":
            return {"X-Auth-Token": self.token}
        now = _dt.datetime.now(_dt.UTC)
        amz, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
        phash = "UNSIGNED-PAYLOAD" if self.t.unsigned_payload else \
            hashlib.sha256(body or b"").hexdigest()
        canon = "\n".join([method, urllib.parse.quote(path, safe="/~"), "",
                           f"host:{self.hostport}", f"x-amz-content-sha256:{phash}",
                           f"x-amz-date:{amz}", "", "host;x-amz-content-sha256;x-amz-date",
                           phash])
        scope = f"{day}/{self.t.region}/s3/aws4_request"
        sts = "\n".join(["AWS4-HMAC-SHA256", amz, scope,
                         hashlib.sha256(canon.encode()).hexdigest()])
        sig = hmac.new(self._signing_key(day), sts.encode(), hashlib.sha256).hexdigest()
        return {"x-amz-date": amz, "x-amz-content-sha256": phash,
                "Authorization": f"AWS4-HMAC-SHA256 Credential={self.t.access_key}/{scope}, "
                                 f"SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
                                 f"Signature={sig}"}

    def request(self, method: str, name: str | None, body: bytes | None, timeout: float,
                sink: bytearray) -> tuple[int, int]:
        """(HTTP status, CONN_ERROR or TIMED_OUT; bytes received)."""
        path = f"{self.prefix}/{self.t.bucket}" + (f"/{name}" if name else "")
        headers = self._headers(method, path, body)
        if body is not None:
            headers["Content-Length"] = str(len(body))
        elif method == "PUT":
            headers["Content-Length"] = "0"
        for attempt in (0, 1):  # one retry on a stale keep-alive connection
            if self.conn is None:
                self.conn = _connection(self.scheme, self.host, self.port, timeout)
            token = _DEADLINES.arm(self.conn, timeout)
            failed = None
            try:
                self.conn.request(method, path, body=body, headers=headers)
                resp = self.conn.getresponse()
                got = 0
                view = memoryview(sink)
                while True:
                    n = resp.readinto(view)
                    if not n:
                        break
                    got += n
            except TimeoutError:
                failed = TIMED_OUT
            except (OSError, http.client.HTTPException):
                failed = CONN_ERROR
            finally:
                cut = _DEADLINES.disarm(token)  # whether its deadline shut the socket down
            if cut or failed == TIMED_OUT:  # cut short at its deadline: not an answer
                self.close()
                return TIMED_OUT, 0
            if failed is None:
                if resp.will_close:
                    self.close()
                return resp.status, got
            self.close()
            if attempt == 1:
                return CONN_ERROR, 0
        return CONN_ERROR, 0

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def swift_login(target: Target, timeout: float = 10) -> tuple[str, str]:
    c = _connection(*url_address(target.auth_url), timeout)
    u = urllib.parse.urlsplit(target.auth_url)
    token = _DEADLINES.arm(c, timeout)
    failed: Exception | None = None
    try:
        c.request("GET", u.path, headers={"X-Auth-User": target.user,
                                          "X-Auth-Key": target.key})
        r = c.getresponse()
        r.read()
    except (OSError, http.client.HTTPException) as exc:
        failed = exc
    finally:
        cut = _DEADLINES.disarm(token)  # whether its deadline shut the socket down
        c.close()
    if cut or isinstance(failed, TimeoutError):
        raise LoadError(f"swift auth at {target.auth_url}: {status_text(TIMED_OUT, timeout)}")
    if failed is not None:
        raise LoadError(f"swift auth at {target.auth_url}: connection error ({failed})")
    if r.status >= 300:
        raise LoadError(f"swift auth at {target.auth_url} answered {r.status}")
    return r.getheader("X-Storage-Url"), r.getheader("X-Auth-Token")


# ----------------------------------------------------------------------------- state
class _Keys:
    """The live objects: O(1) random pick, add and remove, under one lock. A key in use by
    a request is `busy`: DELETE never takes a busy key and GET/PUT never take a key being
    deleted, so a concurrent DELETE cannot turn a GET into a 404 (not a server error)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.names: list[str] = []
        self.sizes: dict[str, int] = {}
        self.pos: dict[str, int] = {}
        self.busy: dict[str, int] = {}
        self.deleting: set[str] = set()

    def add(self, name: str, size: int) -> None:
        with self.lock:
            self._add(name, size)

    def _add(self, name: str, size: int) -> None:
        if name not in self.pos:
            self.pos[name] = len(self.names)
            self.names.append(name)
        self.sizes[name] = size

    def _remove(self, name: str) -> None:
        i = self.pos.pop(name)
        last = self.names.pop()
        if last != name:
            self.names[i] = last
            self.pos[last] = i
        self.sizes.pop(name, None)

    def take_get(self, rng: random.Random, tries: int = 8) -> tuple[str, int] | None:
        with self.lock:
            for _ in range(tries if self.names else 0):
                name = self.names[rng.randrange(len(self.names))]
                if name not in self.deleting:
                    self.busy[name] = self.busy.get(name, 0) + 1
                    return name, self.sizes[name]
            return None

    def take_put(self, name: str) -> bool:
        with self.lock:
            if name in self.deleting:
                return False
            self.busy[name] = self.busy.get(name, 0) + 1
            return True

    def take_delete(self, rng: random.Random, tries: int = 8) -> str | None:
        with self.lock:
            for _ in range(tries if self.names else 0):
                name = self.names[rng.randrange(len(self.names))]
                if not self.busy.get(name) and name not in self.deleting:
                    self._remove(name)
                    self.deleting.add(name)
                    return name
            return None

    def release(self, name: str, put_size: int | None = None) -> None:
        """End of a GET/PUT on `name`; a successful PUT (put_size) makes it live."""
        with self.lock:
            n = self.busy.get(name, 0) - 1
            if n > 0:
                self.busy[name] = n
            else:
                self.busy.pop(name, None)
            if put_size is not None:
                self._add(name, put_size)

    def release_delete(self, name: str) -> None:
        with self.lock:
            self.deleting.discard(name)


@dataclass
class LoadResult:
    records: pd.DataFrame  # one row per request (RECORD_COLUMNS)
    summary: dict[str, float]
    prepare_seconds: float = 0.0
    prepared: bool = False


class _Payload:
    """Unique bodies cheaply: a counter stamped on a slice of one random buffer."""

    def __init__(self, max_size: int, seed: int) -> None:
        self.buf = random.Random(seed).randbytes(max_size + 65536)
        self.n = 0
        self.lock = threading.Lock()
        self.tag = os.urandom(4).hex()

    def make(self, size: int, rng: random.Random) -> bytes:
        with self.lock:
            self.n += 1
            n = self.n
        stamp = f"{self.tag}-{n:016d}|".encode()[:size]
        off = rng.randrange(65536)
        return stamp + self.buf[off:off + size - len(stamp)]


def _marker(spec: LoadSpec) -> str:
    """Names the prepared set: same objects and sizes => same marker."""
    h = hashlib.sha1(repr((spec.objects, sorted(spec.sizes.items()))).encode()).hexdigest()
    return f"storlab-prepared-{h[:12]}"


#: One request's record as the client threads keep it: RECORD_COLUMNS, with the
#: operation as its index in OPS (-1: none).
Row = tuple[float, float, float, int, int, int, int]
_OP_NAMES = {0: "get", 1: "put", 2: "delete", -1: "none"}


# ----------------------------------------------------------------------------- run
def run_load(target: Target, spec: LoadSpec) -> LoadResult:
    """Prepare (unless already done), run the main stage, summarise."""
    rows, prep_s, prepared = load_rows(target, spec)
    records = records_frame(rows)
    return LoadResult(records, summarize(records, spec.warmup, spec.rate), prep_s, prepared)


def load_rows(target: Target, spec: LoadSpec) -> tuple[list[Row], float, bool]:
    """`run_load` without pandas: (every request's row in `t_sched` order, the prepare
    stage's seconds, whether it wrote the objects)."""
    auth = swift_login(target, spec.timeout) if target.api == "swift" else None
    sizes = [int(s) for s in spec.sizes]
    size_p = list(spec.sizes.values())
    payload = _Payload(max(sizes), spec.seed)
    keys = _Keys()
    # one key space per (objects, sizes): runs with other sizes never overwrite this set
    names = [f"{_marker(spec)[17:]}-{i:07d}" for i in range(spec.objects)]
    obj_sizes = random.Random(spec.seed).choices(sizes, weights=size_p, k=spec.objects)
    c0 = _Conn(target, auth)
    sink = bytearray(max(sizes) + 65536)
    t_prep = time.perf_counter()
    prepared = False
    try:
        st, _ = c0.request("PUT", None, None, spec.timeout, sink)
        if st not in (200, 201, 202, 204, 409):
            raise LoadError(f"creating bucket/container {target.bucket!r} at "
                            f"{c0.hostport} got {status_text(st, spec.timeout)}")
        marker = _marker(spec)
        have = False
        if spec.prepare == "auto":
            have = c0.request("HEAD", marker, None, spec.timeout, sink)[0] == 200
        if spec.prepare == "always" or (spec.prepare == "auto" and not have):
            _prepare(target, auth, spec, names, obj_sizes, payload)
            st, _ = c0.request("PUT", marker, b"ok", spec.timeout, sink)
            prepared = True
    finally:
        c0.close()
    prep_s = time.perf_counter() - t_prep
    for n, s in zip(names, obj_sizes):
        keys.add(n, int(s))
    rows = _main(target, auth, spec, names, sizes, size_p, keys, payload)
    if any(r[3] == 2 and 200 <= r[5] < 300 for r in rows) or spec.put_keys == "new":
        # the prepared set is no longer intact: the next run must write it again
        c0 = _Conn(target, auth)
        c0.request("DELETE", _marker(spec), None, spec.timeout, sink)
        c0.close()
    return rows, prep_s, prepared


def records_frame(rows: list[Row]) -> pd.DataFrame:
    """The rows as the records table (RECORD_COLUMNS, the operation by name)."""
    import pandas as pd

    df = pd.DataFrame(rows, columns=list(RECORD_COLUMNS))
    df["op"] = df["op"].map(_OP_NAMES)
    return df


def _prepare(target: Target, auth: tuple[str, str] | None, spec: LoadSpec,
             names: list[str], obj_sizes: list[int], payload: _Payload) -> None:
    """Write every object of the key space with as many threads as clients."""
    todo: queue.SimpleQueue[int] = queue.SimpleQueue()
    for i in range(len(names)):
        todo.put(i)
    errors: list[str] = []

    def work(w: int) -> None:
        c = _Conn(target, auth)
        rng = random.Random(spec.seed * 7919 + w)
        sink = bytearray(16)
        try:
            while True:
                try:
                    i = todo.get_nowait()
                except queue.Empty:
                    return
                st, _ = c.request("PUT", names[i], payload.make(int(obj_sizes[i]), rng),
                                  spec.timeout, sink)
                if not 200 <= st < 300:
                    errors.append(f"{names[i]}: {status_text(st, spec.timeout)}")
                    if len(errors) > 20:
                        return
        finally:
            c.close()
    threads = [threading.Thread(target=work, args=(w,), daemon=True)
               for w in range(min(spec.clients, 16))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise LoadError(f"prepare stage: {len(errors)} PUT(s) failed, e.g. {errors[0]}")


def _main(target: Target, auth: tuple[str, str] | None, spec: LoadSpec, names: list[str],
          sizes: list[int], size_p: list[float], keys: _Keys, payload: _Payload
          ) -> list[Row]:
    n_workers = int(spec.clients)
    per_worker: list[list[tuple[float, float, float, int, int, int]]] = \
        [[] for _ in range(n_workers)]
    ops = list(OPS)
    op_p = [spec.mix[o] for o in ops]
    budget = [spec.requests if spec.requests is not None else math.inf]
    budget_lock = threading.Lock()
    new_counter = [0]
    t0 = time.perf_counter()
    deadline = t0 + spec.duration if spec.duration is not None else math.inf
    arrivals: queue.Queue[float | None] | None = queue.Queue() if spec.mode == "open" else None

    def take() -> bool:
        with budget_lock:
            if budget[0] <= 0:
                return False
            budget[0] -= 1
            return True

    def one(c: _Conn, rng: random.Random, sink: bytearray, t_sched: float, out: list) -> None:
        op = rng.choices(ops, op_p)[0]
        size = 0
        if op == "get":
            got = keys.take_get(rng)
            if got is None:  # nothing readable (all deleted, or all being deleted)
                now = time.perf_counter() - t0
                out.append((t_sched if t_sched >= 0 else now, now, now, 0, 0, -1))
                return
            name = got[0]
            t1 = time.perf_counter()
            st, size = c.request("GET", name, None, spec.timeout, sink)
            keys.release(name)
        elif op == "put":
            size = int(sizes[0] if len(sizes) == 1 else sizes[_draw(rng, size_p)])
            if spec.put_keys == "overwrite":
                for _ in range(8):
                    name = names[rng.randrange(len(names))]
                    if keys.take_put(name):
                        break
                else:
                    now = time.perf_counter() - t0
                    out.append((t_sched if t_sched >= 0 else now, now, now, 1, 0, -1))
                    return
            else:
                with budget_lock:
                    new_counter[0] += 1
                    name = f"new-{payload.tag}-{new_counter[0]:09d}"
                keys.take_put(name)
            body = payload.make(size, rng)
            t1 = time.perf_counter()
            st, _ = c.request("PUT", name, body, spec.timeout, sink)
            keys.release(name, size if 200 <= st < 300 else None)
        else:
            name = keys.take_delete(rng)
            if name is None:
                now = time.perf_counter() - t0
                out.append((t_sched if t_sched >= 0 else now, now, now, 2, 0, -1))
                return
            t1 = time.perf_counter()
            st, _ = c.request("DELETE", name, None, spec.timeout, sink)
            keys.release_delete(name)
        t2 = time.perf_counter()
        out.append((t_sched if t_sched >= 0 else t1 - t0, t1 - t0, t2 - t0, ops.index(op),
                    size, st))

    def closed(w: int) -> None:
        c, rng = _Conn(target, auth), random.Random(spec.seed * 1_000_003 + w)
        sink = bytearray(max(max(sizes), max(keys.sizes.values(), default=0)) + 65536)
        out = per_worker[w]
        try:
            while time.perf_counter() < deadline and take():
                one(c, rng, sink, -1.0, out)
        finally:
            c.close()

    def served(w: int) -> None:
        assert arrivals is not None
        c, rng = _Conn(target, auth), random.Random(spec.seed * 1_000_003 + w)
        sink = bytearray(max(sizes) + 65536)
        out = per_worker[w]
        try:
            while True:
                t_sched = arrivals.get()
                if t_sched is None:
                    return
                one(c, rng, sink, t_sched, out)
        finally:
            c.close()

    workers = [threading.Thread(target=closed if arrivals is None else served, args=(w,),
                                daemon=True) for w in range(n_workers)]
    for t in workers:
        t.start()
    if arrivals is not None:
        _dispatch(arrivals, spec, t0, deadline, take)
        for _ in workers:
            arrivals.put(None)
    for t in workers:
        t.join(timeout=(spec.duration or 0) + spec.timeout * 3 + 60)
    if arrivals is not None:
        # arrivals no client started before the end: they count as not served
        unserved = []
        while True:
            try:
                x = arrivals.get_nowait()
            except queue.Empty:
                break
            if x is not None:
                unserved.append((x, math.nan, math.nan, -1, 0, -2))
        per_worker.append(unserved)
    rows = [(*r, w) for w, recs in enumerate(per_worker) for r in recs]
    rows.sort(key=lambda r: r[0])  # stable, as the table's sort was
    return rows


def _draw(rng: random.Random, p: list[float]) -> int:
    x, acc = rng.random(), 0.0
    for i, pi in enumerate(p):
        acc += pi
        if x < acc:
            return i
    return len(p) - 1


def _dispatch(arrivals: queue.Queue, spec: LoadSpec, t0: float, deadline: float,
              take: Any) -> None:
    """Put each arrival's scheduled time (seconds since t0) on the queue at that time."""
    rng = random.Random(spec.seed + 17)
    rate = float(spec.rate or 1)
    t = 0.0
    while True:
        t += rng.expovariate(rate) if spec.arrivals == "poisson" else 1.0 / rate
        when = t0 + t
        if when >= deadline or not take():
            return
        delay = when - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        arrivals.put(t)


# ----------------------------------------------------------------------------- summary
def summarize(records: pd.DataFrame, warmup: float = 0.0, rate: float | None = None
              ) -> dict[str, float]:
    """Flat metrics from per-request records: ops/s, MB/s, latency mean/p50/p95/p99 (ms)
    per operation, errors; `read_iops`/`write_iops` (GET/PUT per second) for `estimate`.
    Open loop: latency counts from the scheduled arrival (`resp_*`) and from the send."""
    r = records[records["t_sched"] >= warmup]
    done = r[r["status"] >= 0]
    ok = done[(done["status"] >= 200) & (done["status"] < 300) |
              ((done["op"] == "delete") & (done["status"] == 404))]
    if len(done):
        span = float(done["t_end"].max() - max(warmup, float(r["t_sched"].min())))
    else:
        span = math.nan
    span = span if span > 0 else math.nan
    out: dict[str, float] = {
        "requests": float(len(done)), "duration_s": span,
        "errors": float(len(done) - len(ok)),
        "ops_per_s": len(ok) / span, "mb_per_s": float(ok["size"].sum()) / 1e6 / span,
        "unserved": float((r["status"] == -2).sum()), "skipped": float((r["status"] == -1).sum()),
        "conn_errors": float((done["status"] == CONN_ERROR).sum()),
        "timeouts": float((done["status"] == TIMED_OUT).sum()),
    }
    for op in OPS:
        o = ok[ok["op"] == op]
        lat = (o["t_end"] - o["t_start"]).to_numpy() * 1e3
        out[f"{op}_ops_per_s"] = len(o) / span
        out[f"{op}_mb_per_s"] = float(o["size"].sum()) / 1e6 / span
        out[f"{op}_errors"] = float(((done["op"] == op).sum()) - len(o))
        for name, v in _lat_stats(lat).items():
            out[f"{op}_lat_{name}_ms"] = v
        if rate is not None:
            resp = (o["t_end"] - o["t_sched"]).to_numpy() * 1e3
            for name, v in _lat_stats(resp).items():
                out[f"{op}_resp_{name}_ms"] = v
    lat = (ok["t_end"] - ok["t_start"]).to_numpy() * 1e3
    for name, v in _lat_stats(lat).items():
        out[f"lat_{name}_ms"] = v
    # names the estimate model and fio-based tools share
    out["read_iops"], out["write_iops"] = out["get_ops_per_s"], out["put_ops_per_s"]
    out["total_iops"] = out["get_ops_per_s"] + out["put_ops_per_s"]
    out["read_bw_bytes"] = out["get_mb_per_s"] * 1e6
    out["write_bw_bytes"] = out["put_mb_per_s"] * 1e6
    out["total_bw_bytes"] = out["read_bw_bytes"] + out["write_bw_bytes"]
    if rate is not None:
        out["target_rate"] = float(rate)
    return out


def _lat_stats(ms: Any) -> dict[str, float]:
    import numpy as np

    if len(ms) == 0:
        return {k: math.nan for k in ("mean", "p50", "p95", "p99")}
    p = np.percentile(ms, [50, 95, 99])
    return {"mean": float(ms.mean()), "p50": float(p[0]), "p95": float(p[1]),
            "p99": float(p[2])}


def time_series(records: pd.DataFrame, interval: float = 1.0) -> pd.DataFrame:
    """Per-interval ops/s, MB/s and p50/p99 latency per operation, from the records."""
    import pandas as pd

    r = records[(records["status"] >= 200) & (records["status"] < 300)].copy()
    r["bin"] = (r["t_end"] // interval).astype(int)
    r["lat_ms"] = (r["t_end"] - r["t_start"]) * 1e3
    g = r.groupby(["bin", "op"])
    out = pd.DataFrame({"ops_per_s": g.size() / interval,
                        "mb_per_s": g["size"].sum() / 1e6 / interval,
                        "lat_p50_ms": g["lat_ms"].median(),
                        "lat_p99_ms": g["lat_ms"].quantile(0.99)}).reset_index()
    out["t"] = out.pop("bin") * interval
    return out


def records_to_csv(records: pd.DataFrame) -> str:
    buf = io.StringIO()
    records.to_csv(buf, index=False, float_format="%.6f")
    return buf.getvalue()


def rows_to_csv(rows: list[Row]) -> str:
    """`records_to_csv(records_frame(rows))` without pandas: times with six decimals, a
    time never taken (an arrival no client served) empty."""
    def t(x: float) -> str:
        return "" if x != x else f"{x:.6f}"
    out = [",".join(RECORD_COLUMNS)]
    out += [f"{t(a)},{t(b)},{t(c)},{_OP_NAMES[op]},{size},{st},{w}"
            for a, b, c, op, size, st, w in rows]
    return "\n".join(out) + "\n"


def failed_load(requests: float, errors: float) -> bool:
    """Whether a load's run failed: no request answered, or more than half in error (its
    records are then kept in the store only, not written to `records_dir`)."""
    return requests == 0 or errors > 0.5 * requests


def _counts(rows: list[Row], warmup: float) -> tuple[int, int]:
    """(requests, errors) as `summarize` counts them, from the rows."""
    done = [r for r in rows if r[0] >= warmup and r[5] >= 0]
    ok = sum(1 for r in done if 200 <= r[5] < 300 or (r[3] == 2 and r[5] == 404))
    return len(done), len(done) - ok


#: The records file a child writes in its run directory (its cwd), for storlab to read.
CHILD_RECORDS = "objload-records.csv"


def child_config(target: Target, spec: LoadSpec, records: dict[str, str] | None) -> str:
    """The JSON a child (`main`) reads on stdin: the target (credentials: never in argv, the
    environment or a file), the load, and where to write the records (`records`: `dir`,
    `name`, `home`, as the sandbox shows them), or None."""
    return json.dumps({"target": asdict(target), "spec": asdict(spec), "records": records})


def main() -> int:
    """The load as a child process (`python -m storlab.campaign.runners.objload`): its
    configuration on stdin (`child_config`); every request's record to `CHILD_RECORDS` in
    its working directory (the run's), and, when the load did not fail (`failed_load`),
    gzipped to `records.dir/records.name` (never through a link: `fileio.write_in_dir`);
    on stdout one JSON line (`prepare_s`, `prepared`, `records_error`). Exit 1 with one
    line on stderr when the load cannot run."""
    from ...fileio import write_fresh, write_in_dir

    try:
        cfg = json.loads(sys.stdin.read())
        spec = LoadSpec(**{**cfg["spec"], "sizes": {int(k): v for k, v in
                                                     cfg["spec"]["sizes"].items()}})
        rows, prep_s, prepared = load_rows(Target(**cfg["target"]), spec)
    except (LoadError, KeyError, TypeError, ValueError) as exc:
        print(f"objectstore load: {exc}", file=sys.stderr)
        return 1
    text = rows_to_csv(rows)
    write_fresh(CHILD_RECORDS, text, mode=0o600)
    note = None
    rec = cfg.get("records")
    if rec and not failed_load(*_counts(rows, spec.warmup)):
        try:
            write_in_dir(rec["dir"], rec["name"], gzip.compress(text.encode()),
                         what="records_dir", home=rec["home"], mode=0o600)
        except StorlabError as exc:  # the measurement stands; its records are in the store
            note = str(exc)
    print(json.dumps({"prepare_s": prep_s, "prepared": prepared, "records_error": note}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
