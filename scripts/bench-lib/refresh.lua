-- wrk script of the refresh benchmark: every request rotates one token family's current refresh
-- token, and the answer's refresh_token becomes that family's next. Families come from the file
-- named after `--` (bff-bench pairs: "user_id device_id refresh_token" per line, one family per
-- user, so an answer's user.id names its family). A family is rotated at most `per_family` times
-- (its own limit is 10 a minute) and is never presented twice at once.
--   wrk -t2 -c32 -d15s --latency -s refresh.lua http://127.0.0.1:54361/api/v1/auth/refresh -- pairs.txt 9 2
-- (arguments: the pairs file, rotations per family, wrk's thread count)
local threads = {}
local next_id = 0

function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
  table.insert(threads, thread)
end

local ready = {}      -- families waiting for their next rotation (a queue)
local first, last = 1, 0
local by_user = {}    -- user id -> family
local per_family = 9
-- Globals, so that done() can read them from each thread.
ran_out = 0
lost = 0

local function push(family)
  last = last + 1
  ready[last] = family
end

function init(args)
  local path = args[1]
  if path == nil then error("refresh.lua: pass the pairs file after --") end
  per_family = tonumber(args[2] or "9")
  local count = tonumber(args[3] or "2")
  local index = 0
  for line in io.lines(path) do
    local user, device, token = line:match("^(%S+) (%S+) (%S+)$")
    if user ~= nil then
      -- Each thread takes its own share of the families.
      if index % count == id then
        local family = { user = user, device = device, token = token, uses = 0 }
        by_user[user] = family
        push(family)
      end
      index = index + 1
    end
  end
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
end

function request()
  if first > last then
    -- Every family is in flight or used up: ask for an unknown token (counted, and reported).
    ran_out = ran_out + 1
    return wrk.format(nil, nil, nil, '{"refresh_token":"' .. string.rep("A", 43) .. '","device_id":"bench-ran-out"}')
  end
  local family = ready[first]
  ready[first] = nil
  first = first + 1
  return wrk.format(nil, nil, nil, '{"refresh_token":"' .. family.token .. '","device_id":"' .. family.device .. '"}')
end

function response(status, headers, body)
  if status ~= 200 then return end
  local token = body:match('"refresh_token"%s*:%s*"([^"]+)"')
  local user = body:match('"user"%s*:%s*{[^}]-"id"%s*:%s*"([^"]+)"')
  local family = user and by_user[user]
  if family == nil or token == nil then
    lost = lost + 1
    return
  end
  family.token = token
  family.uses = family.uses + 1
  if family.uses < per_family then push(family) end
end

function done(summary, latency, requests)
  local ran, unmatched = 0, 0
  for _, thread in ipairs(threads) do
    ran = ran + (thread:get("ran_out") or 0)
    unmatched = unmatched + (thread:get("lost") or 0)
  end
  io.write(string.format("refresh.lua: %d requests without a ready family, %d answers not matched to a family\n", ran, unmatched))
end
