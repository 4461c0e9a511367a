-- pause: ARGV = prefix, domain, seconds. Nothing of the domain is claimed until then (a
-- longer pause already in place is kept).
local d, seconds = ARGV[2], tonumber(ARGV[3])
local now = now_seconds()
local untilt = now + math.max(seconds, 0)
local current = tonumber(redis.call('HGET', K_PAUSED, d) or '0') or 0
if untilt > current then redis.call('HSET', K_PAUSED, d, fmt(untilt)) end
refresh(d, now)
return fmt(math.max(untilt, current))
