-- wrk script of the list benchmark: every request is GET <the URL's path> with the AppJWT of a
-- random seeded user (one token per line in the file named after `--`).
--   wrk -t2 -c32 -d15s --latency -s list.lua 'http://127.0.0.1:54361/api/v1/chats?limit=20' -- tokens.txt
local requests = {}

function init(args)
  local path = args[1]
  if path == nil then error("list.lua: pass the tokens file after --") end
  for line in io.lines(path) do
    if #line > 0 then
      requests[#requests + 1] = wrk.format("GET", wrk.path, { ["Authorization"] = "Bearer " .. line })
    end
  end
  if #requests == 0 then error("list.lua: no tokens in " .. path) end
  -- Each thread has its own Lua state: seed each differently (a table's address differs).
  local address = tonumber(tostring({}):match("0x(%x+)") or "0", 16) or 0
  math.randomseed(os.time() + address % 1000003)
end

function request()
  return requests[math.random(#requests)]
end
