-- Upsert or delete facts; every change bumps the commit fence (``version``).
-- KEYS: state obs obsid obsts obsgone facts pending. ARGV: ttl now mode(upsert|delete) args...
local n = 0
if ARGV[3] == 'upsert' then
  for i = 4, #ARGV, 2 do redis.call('HSET', KEYS[6], ARGV[i], ARGV[i + 1]); n = n + 1 end
  redis.call('HINCRBY', KEYS[1], 'version', 1)
  touch(ARGV[1])
else
  for i = 4, #ARGV do n = n + redis.call('HDEL', KEYS[6], ARGV[i]) end
  -- nothing deleted, nothing to fence (and no state key created for an erased identity)
  if n > 0 then
    redis.call('HINCRBY', KEYS[1], 'version', 1)
    touch(ARGV[1])
  end
end
return n
