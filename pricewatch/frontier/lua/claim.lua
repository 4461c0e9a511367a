-- claim: ARGV = prefix, n, lease ttl, per-domain cap (0 = none), token base, max attempts,
-- reap limit, domain scan limit, the leases whose fetch ended since the last call (a JSON
-- array of [id, token] pairs, or '' for none), adaptive limits (1: each domain's learned cap
-- in `limit_caps` applies too, the lower of the two wins) and the cap of a domain with none
-- learned, and the budget's burst (seconds).
-- Releases those leases' slots first (release_fetched in common.lua), so that the claim sees
-- them free, and reaps expired leases; then takes up to n due entries: domains in order of
-- their most overdue entry, round-robin, skipping paused domains, domains whose budget's pace
-- allows no request now (budget.refill) and domains at the in-flight cap (leases whose fetch
-- has not ended, see release.lua); within a domain the most overdue first. Each moves from
-- sched:<domain> to `inflight` (scored by the lease deadline) with a fresh token in `leases`.
-- Returns {deadline, leases, malformed ids, reaped, dead-lettered, released}; each lease is one
-- string of tab-separated fields: id, token, url, domain, sku, importance, attempts, failures,
-- gone, checks, changes, seen_at, health, rate_changes, rate_exposure, observed_at, and the
-- domain's allocation multiplier (0: none) (add refuses URLs and SKUs with control characters).
local n, ttl, cap = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local token_base, max_attempts = ARGV[5], tonumber(ARGV[6])
local reap_limit, scan_limit = tonumber(ARGV[7]), tonumber(ARGV[8])
local adaptive, start = ARGV[10] == '1', tonumber(ARGV[11])
local burst = tonumber(ARGV[12])
local now = now_seconds()
local released = 0
if ARGV[9] ~= nil and ARGV[9] ~= '' then released = release_fetched(cjson.decode(ARGV[9])) end
local malformed = {}
local reaped, dead = reap(now, reap_limit, max_attempts, malformed)
local deadline = now + ttl

-- The due domains, and their pause, in-flight count and health, in one call each.
local active = {}
local due_domains = redis.call('ZRANGEBYSCORE', K_READY, '-inf', now, 'LIMIT', 0, scan_limit)
if #due_domains > 0 then
  local pauses = redis.call('HMGET', K_PAUSED, unpack(due_domains))
  local held = redis.call('HMGET', K_DOMAIN_INFLIGHT, unpack(due_domains))
  local fetched = redis.call('HMGET', K_DOMAIN_FETCHED, unpack(due_domains))
  local health = redis.call('HMGET', K_HEALTH, unpack(due_domains))
  local budget = redis.call('HMGET', K_BUDGET, unpack(due_domains))
  local learned = {}
  if adaptive then learned = redis.call('HMGET', K_LIMIT_CAPS, unpack(due_domains)) end
  local buckets = redis.call('HMGET', K_BUDGET_TOKENS, unpack(due_domains))
  for i, d in ipairs(due_domains) do
    if (tonumber(pauses[i] or '0') or 0) > now then
      refresh(d, now)
    else
      -- The cap counts the leases being fetched: held, minus those whose fetch ended.
      local inflight = tonumber(held[i] or '0') or 0
      local fetching = inflight - (tonumber(fetched[i] or '0') or 0)
      local limit = cap
      local mine = 0
      if adaptive then mine = tonumber(learned[i] or start) or start end
      if mine > 0 and (limit <= 0 or mine < limit) then limit = mine end
      local room = n
      if limit > 0 then room = math.min(n, limit - fetching) end
      local mu, pace, tokens = '0', 0, nil
      if budget[i] then
        local m, p = string.match(budget[i], '^(%S+) %S+ (%S+)')
        if m then mu, pace = m, tonumber(p) or 0 else mu = string.match(budget[i], '^(%S+)') end
      end
      local claimed = 0
      if pace > 0 then
        local left, at = 0, 0
        if buckets[i] then
          local l, a, c = string.match(buckets[i], '^(%S+) (%S+) ?(%S*)$')
          left, at, claimed = tonumber(l) or 0, tonumber(a) or 0, tonumber(c) or 0
        end
        tokens = refill(left, at, now, pace, burst)
        room = math.min(room, math.floor(tokens))
      end
      if room > 0 then
        active[#active + 1] = {d = d, room = room, taken = {}, inflight = inflight,
          health = health[i] or '1', mu = mu, tokens = tokens, claimed = claimed}
      end
    end
  end
end

-- Rounds: every live domain gets an equal share of what is left, until n or nothing due.
local remaining, counter = n, 0
local zargs, hargs = {}, {}
local live = active
while remaining > 0 and #live > 0 do
  local share = math.max(1, math.floor(remaining / #live))
  local still = {}
  for _, a in ipairs(live) do
    if remaining <= 0 then break end
    local want = math.min(share, a.room - #a.taken, remaining)
    local key = sched_key(a.d)
    local found = redis.call('ZRANGEBYSCORE', key, '-inf', now, 'WITHSCORES', 'LIMIT', 0, want)
    if #found > 0 then
      local ids = {}
      for i = 1, #found, 2 do ids[#ids + 1] = found[i] end
      redis.call('ZREM', key, unpack(ids))
      local raws = redis.call('HMGET', K_ENTRIES, unpack(ids))
      for j, id in ipairs(ids) do
        local rec = decode(raws[j])
        if rec == nil then
          if raws[j] then quarantine(id, raws[j], malformed) end
        else
          counter = counter + 1
          local token = token_base .. ':' .. counter
          zargs[#zargs + 1] = deadline
          zargs[#zargs + 1] = id
          hargs[#hargs + 1] = id
          hargs[#hargs + 1] = token .. '\t' .. found[2 * j] .. '\t' .. a.d
          a.taken[#a.taken + 1] = {id, token, rec}
          remaining = remaining - 1
        end
      end
    end
    if #found / 2 == want and a.room > #a.taken then still[#still + 1] = a end
  end
  live = still
end

-- Write the leases, the in-flight counts and the domains' new places in `ready` in bulk.
local function bulk(command, key, args)
  for i = 1, #args, 2000 do
    redis.call(command, key, unpack(args, i, math.min(i + 1999, #args)))
  end
end
bulk('ZADD', K_INFLIGHT, zargs)
bulk('HSET', K_LEASES, hargs)
local counts, ready, emptied = {}, {}, {}
for _, a in ipairs(active) do
  if #a.taken > 0 then
    counts[#counts + 1] = a.d
    counts[#counts + 1] = a.inflight + #a.taken
    local head = redis.call('ZRANGE', sched_key(a.d), 0, 0, 'WITHSCORES')
    if #head == 0 then
      emptied[#emptied + 1] = a.d
    else
      ready[#ready + 1] = head[2]  -- not paused (checked above), so its head is its place
      ready[#ready + 1] = a.d
    end
  end
end
bulk('HSET', K_DOMAIN_INFLIGHT, counts)
local spent = {}
for _, a in ipairs(active) do
  if a.tokens and #a.taken > 0 then
    spent[#spent + 1] = a.d
    spent[#spent + 1] = exact(a.tokens - #a.taken) .. ' ' .. exact(now) .. ' ' ..
      exact(a.claimed + #a.taken)
  end
end
bulk('HSET', K_BUDGET_TOKENS, spent)
bulk('ZADD', K_READY, ready)
if #emptied > 0 then redis.call('ZREM', K_READY, unpack(emptied)) end

local leases = {}
local depth, more = 1, true
while more do
  more = false
  for _, a in ipairs(active) do
    local t = a.taken[depth]
    if t then
      more = true
      local rec = t[3]
      leases[#leases + 1] = table.concat({t[1], t[2], rec[URL], a.d, rec[SKU], rec[IMPORTANCE],
        rec[ATTEMPTS], rec[FAILURES], rec[GONE], rec[CHECKS], rec[CHANGES], rec[SEEN],
        a.health, exact(rec[RATE_CHANGES]), exact(rec[RATE_EXPOSURE]), exact(rec[OBSERVED]),
        a.mu}, '\t')
    end
  end
  depth = depth + 1
end
return {fmt(deadline), leases, malformed, reaped, dead, released}
