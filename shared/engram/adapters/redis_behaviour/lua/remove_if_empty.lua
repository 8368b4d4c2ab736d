-- Remove the identity only if it holds no observation, no fact and nothing pending (atomic:
-- nothing arriving can be lost).
-- KEYS: state obs obsid obsts obsgone facts pending stage.
if redis.call('ZCARD', KEYS[2]) > 0 or redis.call('HLEN', KEYS[6]) > 0
    or redis.call('HLEN', KEYS[7]) > 0 then
  return 0
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8])
return 1
