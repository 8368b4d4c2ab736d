-- Apply the retention rules; returns how many observations were dropped.
-- KEYS: state obs obsid obsts obsgone facts pending. ARGV: soft_before|'' up_to hard_before|''
local soft, hard = nil, nil
if ARGV[1] ~= '' then soft = ARGV[1] end
if ARGV[3] ~= '' then hard = ARGV[3] end
return prune(soft, tonumber(ARGV[2]), hard)
