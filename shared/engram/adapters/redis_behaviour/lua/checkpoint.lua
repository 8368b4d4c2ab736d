-- Set the checkpoint and drain the pending counts of the observations it now covers
-- (seq in (old cursor, cursor]).
-- KEYS: state obs obsid obsts obsgone facts pending. ARGV: cursor.
local old = tonumber(redis.call('HGET', KEYS[1], 'cursor') or '0')
local new = tonumber(ARGV[1])
if new > old then unpend('(' .. old, new) end
redis.call('HSET', KEYS[1], 'cursor', new)
return 1
