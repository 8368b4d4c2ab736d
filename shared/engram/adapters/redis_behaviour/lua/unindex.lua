-- Drop an identity's index entry unless the identity became active again meanwhile.
-- KEYS: index. ARGV: identity, score read before the removal.
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) <= tonumber(ARGV[2]) then
  return redis.call('ZREM', KEYS[1], ARGV[1])
end
return 0
