-- entry: ARGV = prefix, id. Returns {} when unknown, {'malformed'} when set aside, else
-- {state, due, url, domain, sku, importance, attempts, failures, gone, checks, changes, seen_at}.
local id = ARGV[2]
if redis.call('HEXISTS', K_MALFORMED, id) == 1 then return {'malformed'} end
local rec = decode(redis.call('HGET', K_ENTRIES, id))
if rec == nil then return {} end
local d = rec[2]
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
return {state, fmt(due), rec[1], d, rec[3], fmt(rec[4]), rec[5], rec[6], rec[7], rec[8],
  rec[9], fmt(rec[10])}
