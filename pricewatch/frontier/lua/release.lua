-- release: ARGV = prefix, and a JSON array of [id, token] pairs: the fetches of these leases
-- ended (release_fetched in common.lua). Returns how many leases were released.
return release_fetched(cjson.decode(ARGV[2]))
