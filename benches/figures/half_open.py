#!/usr/bin/env python3
"""Opens N connections that send half a request head and never finish it, against a running
gateway, while normal chat requests keep going; reports how many half-open connections the
gateway closed and when, and how the normal requests fared. Loopback only, bounded in count
and time.

    half_open.py --url http://127.0.0.1:24080 --count 1000 --wait 30
"""
import argparse, json, selectors, socket, time, urllib.request
from urllib.parse import urlparse

def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--count", type=int, default=1000)
    p.add_argument("--wait", type=float, default=30.0)
    p.add_argument("--requests", type=int, default=50)
    a = p.parse_args()
    host, port = urlparse(a.url).hostname, urlparse(a.url).port
    sel = selectors.DefaultSelector()
    sent_at = {}
    for i in range(a.count):
        s = socket.create_connection((host, port))
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-ty")
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, i)
        sent_at[i] = time.monotonic()
    opened = time.monotonic()
    body = json.dumps({"model": "sim-llama", "max_tokens": 4,
                       "messages": [{"role": "user", "content": "hi"}]}).encode()
    ok, lat = 0, []
    for _ in range(a.requests):
        t = time.monotonic()
        req = urllib.request.Request(a.url + "/v1/chat/completions", data=body,
                                     headers={"content-type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                ok += r.status == 200
        except Exception:
            pass
        lat.append(time.monotonic() - t)
    closed_after = []
    deadline = opened + a.wait
    while len(closed_after) < a.count and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=0.2):
            s = key.fileobj
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if not data:
                closed_after.append(time.monotonic() - sent_at[key.data])
                sel.unregister(s)
                s.close()
    lat.sort()
    print(json.dumps({
        "half_open": a.count,
        "closed": len(closed_after),
        "closed_after_s_min": round(min(closed_after), 2) if closed_after else None,
        "closed_after_s_max": round(max(closed_after), 2) if closed_after else None,
        "normal_requests": a.requests, "normal_ok": ok,
        "normal_p50_ms": round(lat[len(lat) // 2] * 1000, 1),
        "normal_max_ms": round(lat[-1] * 1000, 1),
    }))

if __name__ == "__main__":
    main()
