-- complete: ARGV = prefix, health alpha, and a JSON array with one array per completion:
-- [id, token, delay (seconds from now; < 0 = retire), failures, gone, checks, changes,
--  seen (1 = fetched fine now), health sample (< 0 = none), rate_changes, rate_exposure,
--  observed_at].
-- A completion whose token is not the entry's current lease is ignored (as is a second
-- completion of the same lease). Returns {applied, malformed ids, retired}.
local alpha = tonumber(ARGV[2])
local now = now_seconds()
local items = cjson.decode(ARGV[3])
local ids = {}
for j, item in ipairs(items) do ids[j] = item[1] end
if #ids == 0 then return {0, {}, 0} end
local leases = redis.call('HMGET', K_LEASES, unpack(ids))
local mine, where, doms, seen, fetched = {}, {}, {}, {}, {}
for j, id in ipairs(ids) do
  local v = leases[j]
  if v and not seen[id] then
    local current, _, d, done = parse_lease(v)
    if current == items[j][2] then
      seen[id] = true
      mine[#mine + 1] = id
      where[#where + 1] = items[j]
      doms[#doms + 1] = d
      if done then fetched[d] = (fetched[d] or 0) + 1 end
    end
  end
end
if #mine == 0 then return {0, {}, 0} end
redis.call('HDEL', K_LEASES, unpack(mine))
redis.call('ZREM', K_INFLIGHT, unpack(mine))
local released = {}
for _, d in ipairs(doms) do released[d] = (released[d] or 0) + 1 end
for d, count in pairs(released) do release_slot(d, count, fetched[d]) end

local raws = redis.call('HMGET', K_ENTRIES, unpack(mine))
local applied, retired_count = 0, 0
local malformed, hargs, sched, retired, health = {}, {}, {}, {}, {}
for j, id in ipairs(mine) do
  local rec = decode(raws[j])
  if rec == nil then
    if raws[j] then quarantine(id, raws[j], malformed) end
  else
    local item, d = where[j], doms[j]
    rec[ATTEMPTS] = 0
    rec[FAILURES], rec[GONE], rec[CHECKS], rec[CHANGES] = item[4], item[5], item[6], item[7]
    rec[RATE_CHANGES], rec[RATE_EXPOSURE], rec[OBSERVED] = item[10], item[11], item[12]
    if item[8] == 1 then rec[SEEN] = math.ceil(now) end
    hargs[#hargs + 1] = id
    hargs[#hargs + 1] = encode(rec)
    local target = sched
    local score = now
    if item[3] < 0 then
      target = retired
      retired_count = retired_count + 1
    else
      score = now + item[3]
    end
    local list = target[d]
    if not list then
      list = {}
      target[d] = list
    end
    list[#list + 1] = score
    list[#list + 1] = id
    if item[9] >= 0 then
      local h = health[d]
      if h == nil then h = tonumber(redis.call('HGET', K_HEALTH, d) or '1') or 1 end
      health[d] = h + alpha * (item[9] - h)
    end
    applied = applied + 1
  end
end
if #hargs > 0 then redis.call('HSET', K_ENTRIES, unpack(hargs)) end
for d, list in pairs(sched) do
  redis.call('ZADD', sched_key(d), unpack(list))
  -- The domain's place in `ready` moves only if an entry became due before it.
  local earliest = list[1]
  for k = 3, #list, 2 do
    if list[k] < earliest then earliest = list[k] end
  end
  local current = redis.call('ZSCORE', K_READY, d)
  if not current or earliest < tonumber(current) then refresh(d, now) end
end
for d, list in pairs(retired) do redis.call('ZADD', retired_key(d), unpack(list)) end
for d, h in pairs(health) do redis.call('HSET', K_HEALTH, d, fmt(h)) end
return {applied, malformed, retired_count}
