-- rates: ARGV = prefix, domain, offset, limit, with urls (1/0). The scheduled entries of the
-- domain at ranks [offset, offset + limit) of its schedule, for the budget's allocation: one
-- string per entry, "importance<TAB>rate_changes<TAB>rate_exposure" (+ "<TAB>url" with urls).
-- Returns {entries, malformed ids}; fewer than limit entries means the end.
local d, offset, limit, with_urls = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5] == '1'
local ids = redis.call('ZRANGE', sched_key(d), offset, offset + limit - 1)
if #ids == 0 then return {{}, {}} end
local raws = redis.call('HMGET', K_ENTRIES, unpack(ids))
local out, malformed = {}, {}
for j, id in ipairs(ids) do
  local rec = decode(raws[j])
  if rec == nil then
    if raws[j] then malformed[#malformed + 1] = id end
  else
    local row = exact(rec[IMPORTANCE]) .. '\t' .. exact(rec[RATE_CHANGES]) .. '\t' ..
      exact(rec[RATE_EXPOSURE])
    if with_urls then row = row .. '\t' .. rec[URL] end
    out[#out + 1] = row
  end
end
return {out, malformed}
