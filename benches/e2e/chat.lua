-- wrk script for benches/e2e/overhead.sh: one non-streaming OpenAI chat completion per request,
-- small fixed JSON body. Environment: MODEL (default sim-llama), MAX_TOKENS (default 1).
-- Prints one machine-readable line at the end:
--   RESULT requests=N duration_us=N rps=X p50_us=N p99_us=N non2xx=N bad_status=S errors=N
-- non2xx counts every response whose status is outside 200..299 (wrk itself only counts >= 400);
-- bad_status is one such status (0 if none); errors are socket errors (connect/read/write/timeout).
local model = os.getenv("MODEL") or "sim-llama"
local max_tokens = tonumber(os.getenv("MAX_TOKENS") or "1")

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = string.format(
  '{"model":"%s","messages":[{"role":"user","content":"Say hello to the benchmark."}],'
    .. '"max_tokens":%d,"stream":false}',
  model, max_tokens)

local threads = {}
function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  non2xx = 0
  bad_status = 0
end

function response(status, headers, body)
  if status < 200 or status > 299 then
    non2xx = non2xx + 1
    bad_status = status
  end
end

function done(summary, latency, requests)
  local total, bad = 0, 0
  for _, t in ipairs(threads) do
    total = total + t:get("non2xx")
    if t:get("bad_status") ~= 0 then bad = t:get("bad_status") end
  end
  local e = summary.errors
  io.write(string.format(
    "RESULT requests=%d duration_us=%d rps=%.1f p50_us=%d p99_us=%d non2xx=%d bad_status=%d errors=%d\n",
    summary.requests, summary.duration, summary.requests / (summary.duration / 1e6),
    latency:percentile(50), latency:percentile(99), total, bad,
    e.connect + e.read + e.write + e.timeout))
end
