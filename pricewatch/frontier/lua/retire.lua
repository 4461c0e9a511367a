-- retire: ARGV = prefix, reason, and a JSON array of [id, domain]. Each entry scheduled and
-- not leased is retired with the reason (kept in `retired_reason`); a leased one is left to
-- its fetch. Returns the number retired.
local reason = ARGV[2]
local now = now_seconds()
local retired = 0
local touched = {}
for _, item in ipairs(cjson.decode(ARGV[3])) do
  local id, d = item[1], item[2]
  if redis.call('ZREM', sched_key(d), id) == 1 then
    redis.call('ZADD', retired_key(d), now, id)
    redis.call('HSET', PREFIX .. 'retired_reason', id, reason)
    retired = retired + 1
    touched[d] = true
  end
end
for d in pairs(touched) do refresh(d, now) end
return retired
