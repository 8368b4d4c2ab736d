-- Delete each fact only if it is stored unchanged since it was read.
-- KEYS: state obs obsid obsts obsgone facts pending. ARGV: ttl (id, lastReinforcedAt,
-- updatedAt) triples.
local n = 0
for i = 2, #ARGV, 3 do
  local row = redis.call('HGET', KEYS[6], ARGV[i])
  if row then
    local ok, fact = pcall(cjson.decode, row)
    if ok and type(fact) == 'table' and fact['lastReinforcedAt'] == tonumber(ARGV[i + 1])
        and fact['updatedAt'] == tonumber(ARGV[i + 2]) then
      n = n + redis.call('HDEL', KEYS[6], ARGV[i])
    end
  end
end
if n > 0 then
  redis.call('HINCRBY', KEYS[1], 'version', 1)
  touch(ARGV[1])
end
return n
