-- release: ARGV = prefix, and a JSON array of [id, token] pairs: the fetches of these leases
-- ended. Each stops counting against its domain's in-flight cap, once; the lease itself stays
-- (completed after the store commits, or reaped when it expires). A pair whose token is not
-- the entry's current lease is ignored. Returns how many leases were released.
local items = cjson.decode(ARGV[2])
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
