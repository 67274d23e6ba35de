// llm-stand-in: a local OpenAI-compatible Chat Completions server for development and the contract
// run (StandIns.LocalLLM). It checks requests as the real APIs do but runs no model: every reply is the
// same curious question, streamed in pieces, and a structured-output request (the tags) finds none.
//
//   llm-stand-in --port P [--api-key K] [--model M] [--first-chunk-ms N] [--interval-ms N] [--chunks N]
//                [--timings FILE]
//
// With --timings, each streamed reply adds a line `<first chunk sent> <last chunk sent> <first word
// of the last user message>` (unix times): the benchmark sets its client's times against them. A
// last user message that starts with `slow:` gets its chunks ten times further apart.
//
// Serves `POST /v1/chat/completions` (BFF_LLM_API=openai, BFF_LLM_BASE_URL=http://127.0.0.1:P/v1)
// and the Azure path (BFF_LLM_API=azure, BFF_LLM_BASE_URL=http://127.0.0.1:P). Runs until killed.
import Foundation
import StandIns

let program = StandInProgram("llm-stand-in")
let usage = "llm-stand-in --port P [--api-key K] [--model M] [--first-chunk-ms N] [--interval-ms N] [--chunks N] [--timings FILE]"
let values = StandInOptions(usage: usage)
let port = program.port(values, usage: usage)
let first = Duration.milliseconds(values.int("first-chunk-ms", default: 0))
let interval = Duration.milliseconds(values.int("interval-ms", default: 0))
let pieces = Int(values["chunks"] ?? "0").flatMap { $0 > 0 ? $0 : nil }
let timings = values["timings"].map { path -> FileHandle in
    _ = FileManager.default.createFile(atPath: path, contents: nil)
    return FileHandle(forWritingAtPath: path)!
}
let reply = ["なるほど。", "では、", "どうしてそうなるのか、", "もう少しくわしく教えてくれる？"]
let llm = LocalLLM(
    apiKey: values["api-key"] ?? "local-llm-key", model: values["model"] ?? "local-tutor",
    answer: { request, number in
        if timings == nil { program.say("request \(number)") }
        // A structured-output request (the misconception tags) gets the schema's JSON: no findings.
        if request.responseFormat != nil { return .reply([#"{"misconceptions":[]}"#]) }
        let slow = request.messages.last(where: { $0.role == "user" })?.content.hasPrefix("slow:") == true
        let chunks = pieces.map { count in (0..<count).map { reply[$0 % reply.count] } } ?? reply
        return .reply(chunks, firstChunkAfter: first, interval: slow ? interval * 10 : interval)
    },
    onStreamed: { request, firstChunk, lastChunk in
        guard let timings else { return }
        let marker = request.messages.last(where: { $0.role == "user" })?.content.split(separator: " ").first ?? "-"
        timings.write(Data(String(format: "%.6f %.6f %@\n", firstChunk.timeIntervalSince1970, lastChunk.timeIntervalSince1970, String(marker)).utf8))
    })
await program.serve(
    llm.router, port: port, banner: { "\($0)/v1/chat/completions (model \(llm.model)), Azure path under \($0)/openai/deployments/" },
    violations: llm.violations)
