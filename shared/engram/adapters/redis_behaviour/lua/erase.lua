-- Delete every key of the identity; nothing lingers. A consolidation that read before the
-- erasure is fenced by the generation it read.
-- KEYS: state obs obsid obsts obsgone facts pending stage.
local obs = redis.call('ZCARD', KEYS[2])
local facts = redis.call('HLEN', KEYS[6])
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8])
return {obs, facts}
