-- reap: ARGV = prefix, limit, max attempts. Returns {reaped, malformed ids, dead-lettered}.
local malformed = {}
local reaped, dead = reap(now_seconds(), tonumber(ARGV[2]), tonumber(ARGV[3]), malformed)
return {reaped, malformed, dead}
