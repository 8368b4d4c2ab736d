-- The fenced commit of a consolidation round: applies only if the generation, cursor and
-- fact version are those the round read; returns -1 when fenced out, else how many
-- observations were pruned.
-- KEYS: state obs obsid obsts obsgone facts pending stage
-- ARGV: exp_cursor exp_version new_cursor now ttl soft_before hard_before exp_pmaxts exp_gen
--       pending (the pending aggregate as read: ``field␞count␞`` repeated), then either
--       ``stage`` (the whole new fact set was written to the stage hash in the same MULTI:
--       it replaces the facts hash), ``none`` (the new fact set is empty) or n_up, n_up
--       (id, json) pairs, deleted fact ids.
local st = redis.call('HMGET', KEYS[1], 'cursor', 'version', 'pmaxts', 'gen', 'seq')
if (st[4] or '') ~= ARGV[9] or tonumber(st[1] or '0') ~= tonumber(ARGV[1])
    or tonumber(st[2] or '0') ~= tonumber(ARGV[2]) then
  redis.call('DEL', KEYS[8])
  return -1
end
if tonumber(st[5] or '0') == tonumber(ARGV[3]) then
  -- nothing arrived since the read: the pending aggregate is exactly what was consolidated
  redis.call('DEL', KEYS[7])
else
  for field, count in string.gmatch(ARGV[10], '([^\30]+)\30([^\30]*)\30') do
    if string.byte(field) ~= 108 then  -- not a label ('l')
      if redis.call('HINCRBY', KEYS[7], field, -tonumber(count)) <= 0 then
        redis.call('HDEL', KEYS[7], field, 'l\31' .. string.sub(field, 3))
      end
    end
  end
end
if ARGV[11] == 'stage' then
  -- the fact set as read (the fence above proves it unchanged) with this round's changes
  redis.call('RENAME', KEYS[8], KEYS[6])
elseif ARGV[11] == 'none' then
  redis.call('DEL', KEYS[6])  -- the round leaves no fact at all
else
  -- many fields per HSET / HDEL call (chunks keep unpack well inside Lua's stack limit)
  local i = 12
  local last = 11 + 2 * tonumber(ARGV[11])
  while i <= last do
    local j = math.min(i + 999, last)
    redis.call('HSET', KEYS[6], unpack(ARGV, i, j))
    i = j + 1
  end
  while i <= #ARGV do
    local j = math.min(i + 999, #ARGV)
    redis.call('HDEL', KEYS[6], unpack(ARGV, i, j))
    i = j + 1
  end
end
local version = tonumber(st[2] or '0') + 1
if tonumber(st[3] or '0') == tonumber(ARGV[8]) then
  redis.call('HSET', KEYS[1], 'cursor', ARGV[3], 'active', ARGV[4], 'version', version, 'pmaxts', 0)
else
  redis.call('HSET', KEYS[1], 'cursor', ARGV[3], 'active', ARGV[4], 'version', version)
end
local pruned = prune(ARGV[6], tonumber(ARGV[3]), ARGV[7])
touch(ARGV[5])
return pruned
