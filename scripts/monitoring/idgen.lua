-- idgen's numbers for redis_exporter's -script option (EVAL, or EVAL_RO with
-- -lua-script-read-only): returns key, value pairs as strings, which the exporter publishes
-- as redis_script_values{key="<key>", filename="<this file>"}.
--
-- Every numeric field of INFO idgen (idgen_snowflake_ids_issued, idgen_errors,
-- idgen_clock_paced, idgen_conflicts, ...) under its own name, plus:
--   idgen_module_loaded            1 if the node has the idgen module, 0 if not
--   idgen_warnings_count           how many guarantees the node's settings put at risk
--   idgen_identity_policy_refuse   1 if identity-conflicts is refuse, 0 if warn (when reported)
-- Text fields (the epoch's date, the warnings' wording) are left out: the exporter parses
-- every value as a number and drops the whole script's output if one is not.
-- Reads only INFO: safe under EVAL_RO and on replicas.

local info = redis.call('INFO', 'idgen')
local result = {}
local loaded = 0

for line in string.gmatch(info, '[^\r\n]+') do
  local field, value = string.match(line, '^(idgen_[%w_]+):(.*)$')
  if field then
    loaded = 1
    if string.match(value, '^%-?%d+$') then
      table.insert(result, field)
      table.insert(result, value)
    elseif field == 'idgen_warnings' then
      local count = 0
      if value ~= 'none' and value ~= '' then
        count = 1
        for _ in string.gmatch(value, ' | ') do
          count = count + 1
        end
      end
      table.insert(result, 'idgen_warnings_count')
      table.insert(result, tostring(count))
    elseif field == 'idgen_identity_policy' then
      table.insert(result, 'idgen_identity_policy_refuse')
      table.insert(result, value == 'refuse' and '1' or '0')
    end
  end
end

table.insert(result, 'idgen_module_loaded')
table.insert(result, tostring(loaded))
return result
