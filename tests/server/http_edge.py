#!/usr/bin/env python3
"""Raw-socket checks of vt serve's HTTP edge: connection exhaustion, half-closed
clients, early refusal, framing edge cases, abort accounting. Driven by
tests/test_server_conns.sh, which starts the servers; each check prints
"ok NAME" or "FAIL NAME: why". No check asserts a time: socket timeouts only
bound how long a check waits for an outcome.

usage: http_edge.py GROUP PORT [LOG]
"""
import json
import re
import select
import socket
import struct
import sys
import time

PORT = 0
LOG = None
passed = failed = 0


def check(name, ok, why=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok {name}")
    else:
        failed += 1
        print(f"FAIL {name}: {why}")


def conn(timeout=10.0):
    s = socket.create_connection(("127.0.0.1", PORT), timeout=timeout)
    s.settimeout(timeout)
    return s


def read_all(s):
    """Bytes until EOF (or the socket timeout, which counts as 'hung')."""
    out = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                return out, "eof"
            out += d
    except socket.timeout:
        return out, "timeout"
    except (ConnectionResetError, BrokenPipeError):
        return out, "reset"


def read_response(s):
    """One HTTP response (Content-Length or chunked or until EOF): (status, headers, body, how)."""
    buf = b""
    try:
        while b"\r\n\r\n" not in buf:
            d = s.recv(65536)
            if not d:
                return None, {}, buf, "eof"
            buf += d
        head, rest = buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        hdrs = {}
        for l in lines[1:]:
            k, _, v = l.partition(":")
            hdrs[k.strip().lower()] = v.strip()
        if "content-length" in hdrs:
            n = int(hdrs["content-length"])
            while len(rest) < n:
                d = s.recv(65536)
                if not d:
                    break
                rest += d
            return status, hdrs, rest[:n], "ok"
        if hdrs.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                while b"\r\n" not in rest:
                    d = s.recv(65536)
                    if not d:
                        return status, hdrs, body, "eof"
                    rest += d
                line, rest = rest.split(b"\r\n", 1)
                n = int(line.split(b";")[0], 16)
                while len(rest) < n + 2:
                    d = s.recv(65536)
                    if not d:
                        return status, hdrs, body + rest, "eof"
                    rest += d
                body += rest[:n]
                rest = rest[n + 2:]
                if n == 0:
                    return status, hdrs, body, "ok"
        more, how = read_all(s)
        return status, hdrs, rest + more, how
    except socket.timeout:
        return None, {}, buf, "timeout"
    except (ConnectionResetError, BrokenPipeError):
        return None, {}, buf, "reset"


def request(raw, timeout=10.0):
    s = conn(timeout)
    try:
        try:
            s.sendall(raw)
        except (BrokenPipeError, ConnectionResetError):
            pass  # answered (and closed) before the whole request was sent: read the answer
        return read_response(s)
    finally:
        s.close()


def get(path, timeout=10.0, extra=""):
    return request(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{extra}\r\n".encode(), timeout)


def post(path, body, extra="", timeout=30.0):
    b = body.encode() if isinstance(body, str) else body
    return request(f"POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
                   f"Content-Length: {len(b)}\r\n{extra}\r\n".encode() + b, timeout)


def metric(name):
    st, _, body, _ = get("/metrics")
    if st != 200:
        return None
    m = re.search(r"^" + re.escape(name) + r" (\S+)$", body.decode(), re.M)
    return float(m.group(1)) if m else None


def log_text():
    with open(LOG, encoding="utf-8", errors="replace") as f:
        return f.read()


def wait_log(pattern, polls=600):
    # a hang guard, not a time bound: polls x 50 ms however loaded the machine
    for _ in range(polls):
        if re.search(pattern, log_text(), re.M):
            return True
        time.sleep(0.05)
    return False


# ---- item 5: framing and request-target edge cases (server: --read-timeout 60)
def group_edge():
    st, _, body, how = request(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
                               b"5\r\nhello\r\n0\r\n\r\n", timeout=15)
    check("TE gzip, chunked -> 501 at once", st == 501 and b"Transfer-Encoding" in body, f"{st} {how} {body[:200]}")
    st, _, body, how = request(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\n"
                               b"Content-Length: 5\r\n\r\nhello", timeout=15)
    check("TE identity + Content-Length -> 501", st == 501, f"{st} {how} {body[:200]}")
    st, _, body, how = request(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                               b"Content-Length: 5\r\n\r\n5\r\nhello\r\n0\r\n\r\n", timeout=15)
    check("TE chunked + Content-Length -> 400", st == 400, f"{st} {how} {body[:200]}")
    st, _, body, how = request(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 17\r\n"
                               b"Content-Length: 5\r\n\r\n{\"prompt\": \"x\"} ", timeout=15)
    check("two different Content-Length -> 400", st == 400 and b"Content-Length" in body, f"{st} {how} {body[:200]}")
    st, _, body, how = request(b"GET /health\x00/x HTTP/1.1\r\nHost: x\r\n\r\n", timeout=15)
    check("NUL byte in the URL -> 400", st == 400 and b"NUL" in body, f"{st} {how} {body[:200]}")
    st, _, body, how = request(b"GET /health%00/x HTTP/1.1\r\nHost: x\r\n\r\n", timeout=15)
    check("%00 in the URL -> 400", st == 400, f"{st} {how} {body[:200]}")
    st, _, body, how = request(b"GET http://127.0.0.1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", timeout=15)
    check("absolute-form target accepted", st == 200 and b'"ok"' in body, f"{st} {how} {body[:200]}")
    st, _, body, how = request(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", timeout=15)
    check("server still serves", st == 200, f"{st} {how}")


# ---- item 5: a huge chunk size (server: --read-timeout 2 --body-timeout 1). MHD does not
# say a chunk's size: a silent one ends at the read timeout, one fed a byte at a time (each
# inside the read timeout) at the body deadline with a 408 answer (with the CORS headers of
# an allowed origin, server: --cors-origins http://ok.example), then the connection closed;
# other clients are served meanwhile.
CHUNKED_HEAD = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nOrigin: http://ok.example\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n")


def huge_chunk(trickle, out):
    s = conn(timeout=15)
    s.sendall(CHUNKED_HEAD + b"ffffffffffffffff\r\nhello")
    if not trickle:
        out["silent"] = read_all(s)
        s.close()
        return
    got, how = b"", "still open"
    for _ in range(300):  # a hang guard (300 x 0.1 s), not a time bound
        time.sleep(0.1)
        try:
            if select.select([s], [], [], 0)[0]:
                d = s.recv(65536)
                if not d:
                    how = "eof"
                    break
                got += d
            s.send(b"x")
        except (BrokenPipeError, ConnectionResetError):
            how = "reset"
            break
    s.close()
    out["trickle"] = (got, how)


def group_chunk():
    import threading
    fives = metric('vt_http_requests_total{status="5xx"}')
    out = {}
    ts = [threading.Thread(target=huge_chunk, args=(t, out)) for t in (False, True)]
    [t.start() for t in ts]
    time.sleep(0.3)  # both sent their chunk header (no bound: the check holds either way)
    st, _, body, how = post("/v1/completions", '{"prompt": "Once", "max_tokens": 4, "temperature": 0, '
                                                '"ignore_eos": true}')
    check("a normal request is served meanwhile", st == 200 and b'"completion_tokens":4' in body,
          f"{st} {how} {body[:200]}")
    [t.join() for t in ts]
    got, how = out.get("silent", (b"", "?"))
    check("chunk size 2^64-1, then silence: closed by the read timeout, never answered 2xx",
          how in ("eof", "reset") and not got.startswith(b"HTTP/1.1 2"), f"{how} {got[:100]}")
    got, how = out.get("trickle", (b"", "?"))
    check("chunk size 2^64-1 fed a byte at a time: closed at the body deadline, never answered 2xx",
          how in ("eof", "reset") and not got.startswith(b"HTTP/1.1 2"), f"{how} {got[:100]}")
    head, _, body = got.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    fields = {k.strip().lower(): v.strip() for k, _, v in (l.partition(b":") for l in lines[1:])}
    try:
        err = json.loads(body.decode()).get("error", {})
    except (ValueError, UnicodeDecodeError, AttributeError):
        err = {}
    check("the trickled request is answered 408 with Connection: close before the close",
          lines[0] == b"HTTP/1.1 408 Request Timeout" and fields.get(b"connection") == b"close"
          and fields.get(b"content-length") == str(len(body)).encode()
          and fields.get(b"access-control-allow-origin") == b"http://ok.example", f"{how} {got[:300]}")
    check("the 408's body is the usual JSON error, naming --body-timeout",
          err.get("code") == 408 and "--body-timeout" in err.get("message", "") and "type" in err, f"{body[:300]}")
    check("the trickled request is logged 408 with its reason",
          wait_log(r"POST /v1/completions 408 .*--body-timeout"), log_text()[-600:])
    check("no 'internal error' line from libmicrohttpd for that close",
          "Application reported internal error" not in log_text(), log_text()[-600:])
    check("neither counts as a server error", metric('vt_http_requests_total{status="5xx"}') == fives, "5xx grew")
    st, _, _, how = get("/health")
    check("server still serves after the huge chunks", st == 200, f"{st} {how}")


# ---- item 3: a chunked body that goes on past --max-body (server: --max-body 1024) is read
# and dropped up to a hard cap of 64 MiB more, then answered 413 on the socket and closed.
# The client sends exactly one byte past the cap and then reads, so that the server closes
# with nothing unread (a reset would destroy the answer).
def group_cap():
    cap = 1024 + (64 << 20)
    s = conn(timeout=30)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
              + b"%x\r\n" % (cap + 4096))
    piece = b"x" * (1 << 20)
    left = cap + 1
    while left > 0:
        s.sendall(piece[:min(left, len(piece))])
        left -= min(left, len(piece))
    got, how = read_all(s)
    s.close()
    head, _, body = got.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    try:
        err = json.loads(body.decode()).get("error", {})
    except (ValueError, UnicodeDecodeError, AttributeError):
        err = {}
    check("a chunked body past the hard cap is answered 413, then closed",
          lines[0] == b"HTTP/1.1 413 Content Too Large" and how == "eof" and err.get("code") == 413
          and "larger than 1024 bytes" in err.get("message", ""), f"{how} {got[:300]}")
    check("it is logged 413 with its reason", wait_log(r"POST /v1/completions 413 .*larger than 1024 bytes"),
          log_text()[-600:])
    check("no 'internal error' line from libmicrohttpd for that close",
          "Application reported internal error" not in log_text(), log_text()[-600:])
    st, _, _, how = get("/health")
    check("server still serves after it", st == 200, f"{st} {how}")


# ---- item 4: route, method and key are checked before any body byte (server: --api-key k)
def group_early():
    for name, path, key, want in [("no key", "/v1/completions", "", 401),
                                  ("unknown path", "/v1/nothing", "Authorization: Bearer k\r\n", 404),
                                  ("wrong method", "/v1/models", "Authorization: Bearer k\r\n", 405),
                                  ("declared too large", "/v1/completions", "Authorization: Bearer k\r\n", 413)]:
        n = 8 << 20 if want != 413 else (1 << 40)
        s = conn(timeout=15)
        s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\n{key}Content-Length: {n}\r\n\r\n".encode())
        st, _, body, how = read_response(s)  # the body is never sent
        s.close()
        check(f"{name}: {want} before the body", st == want, f"{st} {how} {body[:200]}")
    # 40 connections each declaring 8 MiB without the key: each answered 401 at once
    socks = []
    for _ in range(40):
        s = conn(timeout=15)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 8388608\r\n\r\n" + b"x" * 65536)
        socks.append(s)
    n401 = 0
    for s in socks:
        st, _, _, _ = read_response(s)
        n401 += st == 401
        s.close()
    check("40 keyless 8 MiB uploads answered 401 at once", n401 == 40, f"{n401} of 40")


# ---- item 2: a half-closed client still gets its whole answer
def group_halfclose():
    for stream in (False, True):
        body = ('{"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0, "ignore_eos": true, "stream": %s}'
                % ("true" if stream else "false")).encode()
        s = conn(timeout=20)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body)
        s.shutdown(socket.SHUT_WR)
        st, _, rb, how = read_response(s)
        s.close()
        if stream:
            ok = st == 200 and b"data: [DONE]" in rb and rb.count(b'"text"') >= 8
        else:
            ok = st == 200 and b'"completion_tokens":8' in rb
        check(f"half-closed client, stream={stream}: full answer", ok, f"{st} {how} {rb[-200:]}")


# ---- item 6: abort accounting, mid-upload disconnects, log lines
def group_abort():
    before = metric("vt_requests_aborted_by_client_total")
    body = b'{"prompt": "Once", "max_tokens": 400, "ignore_eos": true, "temperature": 0, "n": 16}'
    s = conn()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    for _ in range(200):  # until it generates (16 x 400 tokens one at a time: -np 1)
        if (metric("vt_requests_running") or 0) >= 1:
            break
        time.sleep(0.05)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with RST: a real hang-up
    s.close()
    ok = wait_log(r"POST /v1/completions 499 .*")
    after = metric("vt_requests_aborted_by_client_total")
    check("non-streamed abort counted once", ok and after is not None and after - before == 1,
          f"logged={ok} before={before} after={after}")
    fives = metric('vt_http_requests_total{status="5xx"}')
    s = conn()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"prompt\": ")
    time.sleep(0.05)
    s.close()
    ok = wait_log(r"POST /v1/completions 499 .*mid-request")
    check("mid-upload disconnect logged 499 with its reason", ok, log_text()[-400:])
    check("mid-upload disconnect is not a 5xx", metric('vt_http_requests_total{status="5xx"}') == fives, "5xx grew")
    st, _, _, _ = post("/v1/completions", '{"prompt": "x", "temperature": "warm"}')
    ok = wait_log(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z vt serve: POST /v1/completions 400 .*: "
                  r"field 'temperature': expected a number")
    check("log lines have a timestamp; a 4xx line gives its reason", st == 400 and ok, log_text()[-400:])


# ---- item 1: idle connections cannot lock anyone out (server: default limits, long timeouts)
def group_exhaust():
    socks = []
    for i in range(300):
        try:
            s = conn(timeout=15)
        except OSError:
            continue
        if i % 3 == 1:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Half: ")  # half a header
        elif i % 3 == 2:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")  # one request, then idle keep-alive
            read_response(s)
        socks.append(s)
    st, _, body, how = get("/health", timeout=20)
    check("/health answers 200 while 300 idle connections are held", st == 200, f"{st} {how}")
    st, _, body, how = get("/metrics", timeout=20)
    text = body.decode(errors="replace")
    m_open = re.search(r"^vt_http_connections_open (\S+)$", text, re.M)
    m_ev = re.search(r"^vt_http_connections_evicted_total (\S+)$", text, re.M)
    check("/metrics counts evicted connections", m_ev is not None and float(m_ev.group(1)) > 0, text[-600:])
    check("one peer holds at most its limit (64) plus the reserve",
          m_open is not None and float(m_open.group(1)) <= 64 + 16 + 2, m_open and m_open.group(1))
    for s in socks:
        s.close()


# ---- item 1: the read and idle timeouts (server: --read-timeout 1 --idle-timeout 1)
def group_timeouts():
    s = conn(timeout=15)
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # never finishes the header
    out, how = read_all(s)
    s.close()
    check("a silent half header is closed by the read timeout", how == "eof" and not out.startswith(b"HTTP/1.1 2"),
          f"{how} {out[:80]}")
    s = conn(timeout=15)
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    st, _, _, _ = read_response(s)
    out, how = read_all(s)
    s.close()
    check("an idle keep-alive connection is closed by the idle timeout", st == 200 and how == "eof", f"{st} {how}")


# ---- item 1: the reserve (server: --max-connections 4 --max-connections-per-peer 0, long timeouts)
def group_reserve():
    busy = []
    for _ in range(4):  # busy: header in, body never comes
        s = conn(timeout=30)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        busy.append(s)
    time.sleep(0.2)
    st, _, _, how = get("/health", timeout=15)
    check("/health gets through when every connection is busy", st == 200, f"{st} {how}")
    st, _, body, how = post("/v1/completions", '{"prompt": "x", "max_tokens": 1}', timeout=15)
    check("other requests on a reserved connection: 503", st == 503 and b"too many connections" in body,
          f"{st} {how} {body[:200]}")
    reserved = [conn(timeout=30) for _ in range(16)]  # the whole reserve, held idle
    time.sleep(0.2)
    extra = conn(timeout=15)
    out, how = read_all(extra)  # refused at accept: closed without an answer
    extra.close()
    check("past the reserve a connection is closed at accept", out == b"" and how in ("eof", "reset"),
          f"{how} {out[:80]}")
    for s in busy + reserved:
        s.close()
    time.sleep(0.2)
    st, _, body, how = get("/metrics", timeout=15)
    check("server serves after the busy connections left", st == 200, f"{st} {how}")
    check("/metrics counts the refused connection",
          re.search(r'^vt_http_connections_refused_total\{reason="full"\} [1-9]', body.decode(), re.M) is not None,
          body.decode()[-500:])


# ---- item 3: what a request may cost is bounded before it is parsed or tokenized
def peak_rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
    return -1


def group_memory():
    import os
    import threading
    pid = int(os.environ["SERVER_PID"])
    base = peak_rss_mib(pid)
    objs = b'{"prompt":[' + b"{}," * ((8 << 20) // 3 - 8) + b"{}]}"
    st, _, body, how = post("/v1/completions", objs, timeout=60)
    check("8 MiB of {} in a prompt: 413 before parsing", st == 413 and b"small JSON values" in body,
          f"{st} {how} {body[:200]}")
    res = []

    def one():
        res.append(post("/v1/completions", objs, timeout=60)[0])
    ts = [threading.Thread(target=one) for _ in range(6)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    check("six at once: six 413s", res == [413] * 6, res)
    deep = b'{"prompt": "x", "extra": ' + b"[" * 100 + b"]" * 100 + b"}"
    st, _, body, how = post("/v1/completions", deep)
    check("JSON nested 100 deep: 400", st == 400 and b"deeper than 64" in body, f"{st} {how} {body[:200]}")
    text = "a " * ((4 << 20) - 64)
    st, _, body, how = post("/tokenize", '{"content": "%s", "with_pieces": true}' % text, timeout=60)
    check("/tokenize of 8 MiB: 413", st == 413 and b"content" in body, f"{st} {how} {body[:200]}")
    st, _, body, how = post("/v1/completions", '{"prompt": "%s", "max_tokens": 1}' % text, timeout=60)
    check("an 8 MiB prompt: refused before tokenizing", st == 400 and b"cannot fit" in body,
          f"{st} {how} {body[:200]}")
    small = "a " * ((1 << 20) // 2 - 8)
    st, _, body, how = post("/tokenize", '{"content": "%s", "with_pieces": true}' % small, timeout=60)
    check("/tokenize of 1 MiB with pieces: answered", st == 200 and body.count(b'"piece"') >= (1 << 19) - 16,
          f"{st} {how} {body[:200]}")
    st, _, body, how = post("/v1/completions", '{"prompt": "Once", "max_tokens": 500, "n": 16, "logprobs": 20}')
    check("a whole answer of 16 x 500 tokens x 21 logprobs: 413", st == 413 and b"stream it" in body,
          f"{st} {how} {body[:200]}")
    peak = peak_rss_mib(pid)
    check("peak RSS stays under 1 GiB", 0 < peak < 1024, f"peak {peak} MiB (was {base} MiB before)")


def main():
    global PORT, LOG
    group = sys.argv[1]
    PORT = int(sys.argv[2])
    LOG = sys.argv[3] if len(sys.argv) > 3 else None
    globals()["group_" + group]()
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
