-- Shared by every frontier script: prepended to each one when it is registered.
-- KEYS (pricewatch/frontier/keys.py, Keys.script_keys) and ARGV[1], the key prefix from which
-- the per-domain keys are built (same hash tag, same cluster slot).
local K_ENTRIES, K_READY, K_INFLIGHT, K_LEASES = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local K_DOMAIN_INFLIGHT, K_PAUSED, K_HEALTH = KEYS[5], KEYS[6], KEYS[7]
local K_DOMAINS, K_MALFORMED, K_DOMAIN_FETCHED = KEYS[8], KEYS[9], KEYS[10]
local K_BUDGET = KEYS[11]
local K_LIMIT_CAPS = KEYS[12]
local K_BUDGET_TOKENS = KEYS[13]
local PREFIX = ARGV[1]

local function now_seconds()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end

local function sched_key(d) return PREFIX .. 'sched:' .. d end
local function retired_key(d) return PREFIX .. 'retired:' .. d end
local function dead_key(d) return PREFIX .. 'dead:' .. d end
local function fmt(x) return string.format('%.6f', x) end
local function exact(x) return string.format('%.17g', x) end

-- A record is a msgpack array (its domain is the key of the set holding its id):
-- {url, sku, importance, attempts, failures, gone, checks, changes, seen_at, rate_changes,
-- rate_exposure, observed_at}; seen_at is in whole seconds, rounded up (so "unseen for N
-- seconds" never fires early). The last three (the change-rate estimate) are written by the
-- first completion that has them: a record without them (new, or written by an older
-- release) reads as 0, 0, 0, no estimate yet.
local URL, SKU, IMPORTANCE, ATTEMPTS, FAILURES, GONE, CHECKS, CHANGES, SEEN = 1, 2, 3, 4, 5, 6, 7, 8, 9
local RATE_CHANGES, RATE_EXPOSURE, OBSERVED = 10, 11, 12

local function decode(raw)
  if not raw then return nil end
  local ok, rec = pcall(cmsgpack.unpack, raw)
  if not ok or type(rec) ~= 'table' then return nil end
  if type(rec[URL]) ~= 'string' or rec[URL] == '' or type(rec[SKU]) ~= 'string' then return nil end
  for i = IMPORTANCE, SEEN do
    if type(rec[i]) ~= 'number' then return nil end
  end
  for i = RATE_CHANGES, OBSERVED do
    if rec[i] == nil then
      rec[i] = 0
    elseif type(rec[i]) ~= 'number' then
      return nil
    end
  end
  return rec
end

local function encode(rec) return cmsgpack.pack(rec) end

-- The requests a domain paced at `pace` per second may make now: its tokens left at `at`
-- plus what the pace added since, at most `burst` seconds' worth (at least one request's).
-- pricewatch/frontier/budget.py refill() is the same rule.
local function refill(tokens, at, now, pace, burst)
  local cap = math.max(pace * burst, 1)
  if at <= 0 then return cap end
  return math.min(tokens + math.max(now - at, 0) * pace, cap)
end

-- Keep a domain's score in `ready` equal to its earliest due time, or the end of its pause.
local function refresh(d, now)
  local head = redis.call('ZRANGE', sched_key(d), 0, 0, 'WITHSCORES')
  if #head == 0 then
    redis.call('ZREM', K_READY, d)
    return
  end
  local score = tonumber(head[2])
  local paused = tonumber(redis.call('HGET', K_PAUSED, d) or '0') or 0
  if paused > now then
    if paused > score then score = paused end
  elseif paused > 0 then
    redis.call('HDEL', K_PAUSED, d)
  end
  redis.call('ZADD', K_READY, score, d)
end

-- A lease is "token<TAB>due<TAB>domain", plus "<TAB>f" once its fetch ended (release).
local function parse_lease(v)
  local token, due, d, flag = string.match(v, '^([^\t]*)\t([^\t]*)\t([^\t]*)(.*)$')
  return token, tonumber(due), d, flag == '\tf'
end

local function decrement(key, d, count)
  local left = redis.call('HINCRBY', key, d, -count)
  if left <= 0 then redis.call('HDEL', key, d) end
end

-- A lease of domain d ends (completed or expired): it no longer counts as held, nor as
-- fetched if its fetch had ended. `domain_inflight` counts the leases held,
-- `domain_fetched` those of them whose fetch ended; the cap applies to the difference.
local function release_slot(d, count, fetched)
  if not d or d == '' then return end
  decrement(K_DOMAIN_INFLIGHT, d, count or 1)
  if fetched and fetched > 0 then decrement(K_DOMAIN_FETCHED, d, fetched) end
end

-- An undecodable record is set aside (never dropped) and reported to the caller, which logs it.
local function quarantine(id, raw, malformed)
  redis.call('HSET', K_MALFORMED, id, raw or '')
  malformed[#malformed + 1] = id
end

-- Expired leases go back to their domain's schedule at their old (overdue) due time, with
-- one more attempt; at `max_attempts` they go to the domain's dead-letter set. Returns
-- {reaped, dead}.
local function reap(now, limit, max_attempts, malformed)
  local ids = redis.call('ZRANGEBYSCORE', K_INFLIGHT, '-inf', now, 'LIMIT', 0, limit)
  local touched = {}
  local dead = 0
  for _, id in ipairs(ids) do
    redis.call('ZREM', K_INFLIGHT, id)
    local v = redis.call('HGET', K_LEASES, id)
    local due, d = now, nil
    if v then
      redis.call('HDEL', K_LEASES, id)
      local _, ldue, ld, fetched = parse_lease(v)
      if ldue then due = ldue end
      d = ld
      release_slot(ld, 1, fetched and 1 or 0)
    end
    local raw = redis.call('HGET', K_ENTRIES, id)
    local rec = decode(raw)
    if rec == nil or not d or d == '' then
      if raw then quarantine(id, raw, malformed) end
    else
      rec[ATTEMPTS] = rec[ATTEMPTS] + 1
      if rec[ATTEMPTS] >= max_attempts then
        redis.call('ZADD', dead_key(d), now, id)
        dead = dead + 1
      else
        redis.call('ZADD', sched_key(d), due, id)
        touched[d] = true
      end
      redis.call('HSET', K_ENTRIES, id, encode(rec))
    end
  end
  for d in pairs(touched) do refresh(d, now) end
  return #ids, dead
end

-- The fetches of these leases ended ({id, token} pairs): each stops counting against its
-- domain's in-flight cap, once; the lease itself stays (completed after the store commits,
-- or reaped when it expires). A pair whose token is not the entry's current lease is
-- ignored. Returns how many leases were released.
local function release_fetched(items)
  if #items == 0 then return 0 end
  local ids = {}
  for j, item in ipairs(items) do ids[j] = item[1] end
  local leases = redis.call('HMGET', K_LEASES, unpack(ids))
  local hargs, counts, seen = {}, {}, {}
  local released = 0
  for j, id in ipairs(ids) do
    local v = leases[j]
    if v and not seen[id] then
      local token, _, d, done = parse_lease(v)
      if token == items[j][2] and not done and d ~= '' then
        seen[id] = true
        v = v .. '\tf'
        hargs[#hargs + 1] = id
        hargs[#hargs + 1] = v
        counts[d] = (counts[d] or 0) + 1
        released = released + 1
      end
    end
  end
  if #hargs > 0 then redis.call('HSET', K_LEASES, unpack(hargs)) end
  for d, count in pairs(counts) do redis.call('HINCRBY', K_DOMAIN_FETCHED, d, count) end
  return released
end
