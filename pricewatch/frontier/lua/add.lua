-- add: ARGV = prefix, a JSON array with one [id, url, domain, sku ('' = none), importance]
-- per entry, and keep_known ('1': a known entry is left as it is).
-- A new entry is due now; a known one keeps its schedule, its sku (if given) and importance
-- are updated and its seen_at moves to now. Returns {new, collided urls, malformed ids}.
local now = now_seconds()
local keep_known = ARGV[3] == '1'
local new = 0
local collided, malformed, touched = {}, {}, {}
for _, item in ipairs(cjson.decode(ARGV[2])) do
  local id, url, d, sku, importance = item[1], item[2], item[3], item[4], item[5]
  local raw = redis.call('HGET', K_ENTRIES, id)
  if not raw then
    if redis.call('HEXISTS', K_MALFORMED, id) == 1 then
      malformed[#malformed + 1] = id
    else
      redis.call('HSET', K_ENTRIES, id, encode({url, sku, importance, 0, 0, 0, 0, 0, math.ceil(now)}))
      redis.call('ZADD', sched_key(d), now, id)
      touched[d] = true
      new = new + 1
    end
  else
    local rec = decode(raw)
    if rec == nil then
      malformed[#malformed + 1] = id
    elseif rec[URL] ~= url then
      collided[#collided + 1] = url
    elseif not keep_known then
      if sku ~= '' then rec[SKU] = sku end
      rec[IMPORTANCE] = importance
      rec[SEEN] = math.ceil(now)
      redis.call('HSET', K_ENTRIES, id, encode(rec))
    end
  end
end
for d in pairs(touched) do
  redis.call('SADD', K_DOMAINS, d)
  refresh(d, now)
end
return {new, collided, malformed}
