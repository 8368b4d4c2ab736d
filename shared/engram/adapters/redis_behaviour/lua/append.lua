-- Append observations not seen before (by id); returns how many were new.
-- KEYS: state obs obsid obsts obsgone facts pending
-- ARGV: ttl_ms now_ms gen labelled then (id, createdAt, member) triples; ``gen`` only sticks
-- when the identity has none yet (a fresh identity, or one erased since); ``labelled`` is
-- the kind letters whose label is stored in the pending aggregate (``l␟key``; the table of
-- observation kinds says which).
-- A script's writes are not undone when a later command fails, so every key it writes is
-- checked first: a key of the wrong type refuses the whole append before anything is written
-- (an id marked seen without its log member would make the redelivery skip it: lost).
for k, want in pairs({[1] = 'hash', [2] = 'zset', [3] = 'hash', [4] = 'zset', [7] = 'hash'}) do
  local got = redis.call('TYPE', KEYS[k])['ok']
  if got ~= 'none' and got ~= want then
    return redis.error_reply('WRONGTYPE ' .. KEYS[k] .. ' is a ' .. got .. ', not a ' .. want)
  end
end
redis.call('HSETNX', KEYS[1], 'gen', ARGV[3])
local st = redis.call('HMGET', KEYS[1], 'seq', 'pmaxts')
local seq = tonumber(st[1] or '0')
local pmaxts = tonumber(st[2] or '0')
local added = 0
for i = 5, #ARGV, 3 do
  local id = ARGV[i]
  if redis.call('HEXISTS', KEYS[3], id) == 0 then
    seq = seq + 1
    redis.call('HSET', KEYS[3], id, seq)
    redis.call('ZADD', KEYS[2], seq, ARGV[i + 2])
    redis.call('ZADD', KEYS[4], ARGV[i + 1], id)
    local kind, key, label = header(ARGV[i + 2])
    if kind then
      redis.call('HINCRBY', KEYS[7], kind .. '\31' .. key, 1)
      if string.find(ARGV[4], kind, 1, true) then
        redis.call('HSET', KEYS[7], 'l\31' .. key, label)
      end
    end
    local created = tonumber(ARGV[i + 1])
    if created > pmaxts then pmaxts = created end
    added = added + 1
  end
end
redis.call('HSET', KEYS[1], 'seq', seq, 'active', ARGV[2], 'pmaxts', pmaxts)
touch(ARGV[1])
return added
