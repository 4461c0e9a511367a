-- reap: ARGV = prefix, limit, max attempts. Returns {reaped, malformed ids}.
local malformed = {}
local reaped = reap(now_seconds(), tonumber(ARGV[2]), tonumber(ARGV[3]), malformed)
return {reaped, malformed}
