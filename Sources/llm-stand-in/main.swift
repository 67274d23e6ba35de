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
import Logging

func write(_ line: String) { FileHandle.standardError.write(Data((line + "\n").utf8)) }

let usage = "llm-stand-in --port P [--api-key K] [--model M] [--first-chunk-ms N] [--interval-ms N] [--chunks N] [--timings FILE]"
let values = StandInOptions(usage: usage)
guard let port = Int(values.required("port", usage: usage)) else {
    write("llm-stand-in: --port must be a number")
    exit(2)
}
let first = Duration.milliseconds(values.int("first-chunk-ms", default: 0))
let interval = Duration.milliseconds(values.int("interval-ms", default: 0))
let logger = {
    var logger = Logger(label: "llm-stand-in")
    logger.logLevel = .warning
    return logger
}()
let pieces = Int(values["chunks"] ?? "0").flatMap { $0 > 0 ? $0 : nil }
let timings = values["timings"].map { path -> FileHandle in
    _ = FileManager.default.createFile(atPath: path, contents: nil)
    return FileHandle(forWritingAtPath: path)!
}
let reply = ["なるほど。", "では、", "どうしてそうなるのか、", "もう少しくわしく教えてくれる？"]
let llm = LocalLLM(
    apiKey: values["api-key"] ?? "local-llm-key", model: values["model"] ?? "local-tutor",
    answer: { request, number in
        if timings == nil { write("llm-stand-in: request \(number)") }
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
do {
    try await serveHTTP1(llm.router, port: port, logger: logger) { base in
        write("llm-stand-in: \(base)/v1/chat/completions (model \(llm.model)), Azure path under \(base)/openai/deployments/")
        while true {
            try await Task.sleep(for: .seconds(1))
            for violation in llm.violations.withLockedValue({ violations in
                defer { violations = [] }
                return violations
            }) { write("llm-stand-in: refused a request: \(violation)") }
        }
    }
} catch {
    write("llm-stand-in: \(error)")
    exit(1)
}
