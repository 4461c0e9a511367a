-- entry: ARGV = prefix, id, domain. Returns {} when unknown, {'malformed'} when set aside,
-- else {state, due, url, sku, importance, attempts, failures, gone, checks, changes, seen_at,
-- rate_changes, rate_exposure, observed_at}.
local id, d = ARGV[2], ARGV[3]
if redis.call('HEXISTS', K_MALFORMED, id) == 1 then return {'malformed'} end
local rec = decode(redis.call('HGET', K_ENTRIES, id))
if rec == nil then return {} end
local state, due = 'orphan', 0
local v = redis.call('HGET', K_LEASES, id)
if v then
  local _, ldue = parse_lease(v)
  state, due = 'inflight', ldue or 0
else
  local s = redis.call('ZSCORE', sched_key(d), id)
  if s then
    state, due = 'scheduled', tonumber(s)
  else
    s = redis.call('ZSCORE', retired_key(d), id)
    if s then
      state, due = 'retired', tonumber(s)
    else
      s = redis.call('ZSCORE', dead_key(d), id)
      if s then state, due = 'dead', tonumber(s) end
    end
  end
end
return {state, fmt(due), rec[URL], rec[SKU], fmt(rec[IMPORTANCE]), rec[ATTEMPTS], rec[FAILURES],
  rec[GONE], rec[CHECKS], rec[CHANGES], fmt(rec[SEEN]), exact(rec[RATE_CHANGES]),
  exact(rec[RATE_EXPOSURE]), exact(rec[OBSERVED])}
