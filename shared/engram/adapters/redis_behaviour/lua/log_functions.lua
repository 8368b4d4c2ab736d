-- Functions shared by the scripts over one identity's keys (prepended to each of them).
-- KEYS: state obs obsid obsts obsgone facts pending (the Keys order of keys.py).
-- header: the kind, key, label and createdAt of a stored observation member.
-- unpend: lower the pending counts of the observations with seq in [lo, hi].
-- drop_live: remove one observation (optionally leaving its idempotency tombstone).
-- prune: the retention rules (soft: consolidated and old; hard: past the retention limit).
-- touch: refresh the TTL backstop of every key.
local function header(member)
  return string.match(member, '^(%a)\31([^\31]*)\31([^\31]*)\31(%d+)\n')
end
local function unpend(lo, hi)
  local rows = redis.call('ZRANGEBYSCORE', KEYS[2], lo, hi)
  -- lowering a pending count is a mutation the commit fence must see: a consolidation that
  -- read the count before would otherwise subtract it a second time
  if #rows > 0 then redis.call('HINCRBY', KEYS[1], 'version', 1) end
  for _, member in ipairs(rows) do
    local kind, key = header(member)
    if kind then
      local field = kind .. '\31' .. key
      if redis.call('HINCRBY', KEYS[7], field, -1) <= 0 then
        redis.call('HDEL', KEYS[7], field, 'l\31' .. key)
      end
    end
  end
end
local function drop_live(id, tomb, cursor)
  local seq = redis.call('HGET', KEYS[3], id)
  if seq then
    if tonumber(seq) > cursor then unpend(seq, seq) end
    redis.call('ZREMRANGEBYSCORE', KEYS[2], seq, seq)
  end
  local ts = redis.call('ZSCORE', KEYS[4], id)
  redis.call('ZREM', KEYS[4], id)
  if tomb and ts then
    redis.call('HSET', KEYS[3], id, 0)
    redis.call('ZADD', KEYS[5], ts, id)
  else
    redis.call('HDEL', KEYS[3], id)
  end
end
local function prune(soft_before, up_to, hard_before)
  local n = 0
  local cursor = tonumber(redis.call('HGET', KEYS[1], 'cursor') or '0')
  if soft_before then
    local ids = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', '(' .. soft_before)
    for _, id in ipairs(ids) do
      local seq = tonumber(redis.call('HGET', KEYS[3], id) or '0')
      if seq <= up_to and seq <= cursor then drop_live(id, true, cursor); n = n + 1 end
    end
  end
  if hard_before then
    local ids = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', '(' .. hard_before)
    for _, id in ipairs(ids) do drop_live(id, false, cursor); n = n + 1 end
    local gone = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', '(' .. hard_before)
    for _, id in ipairs(gone) do redis.call('HDEL', KEYS[3], id) end
    redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', '(' .. hard_before)
  end
  return n
end
local function touch(ttl)
  for i = 1, 7 do redis.call('PEXPIRE', KEYS[i], ttl) end
end
