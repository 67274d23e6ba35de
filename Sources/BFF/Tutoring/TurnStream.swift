import BFFAPI
import BFFPlatform
import BFFWire
import Foundation
import Logging
import OpenAPIRuntime

/// A tutoring turn as server-sent events: `delta` with `{"text": …}` for each piece of the reply as
/// the LLM sends it, then `done` with the JSON answer's body, or `error` with `{code, message}`.
enum TurnStream {
    /// Runs the turn in a task of its own, not the request's: a client that leaves mid-stream stops
    /// reading, and the reply is still completed and stored.
    static func body(_ turns: ChatTurn, _ prepared: ChatTurn.Prepared, language: Language, logger: Logger) -> HTTPBody {
        let (events, sink) = AsyncStream<ArraySlice<UInt8>>.makeStream()
        Task {
            do {
                let result = try await turns.complete(prepared) { text in
                    var json = JSONWriter()
                    json.raw(#"{"text":"#)
                    json.string(text)
                    json.raw("}")
                    sink.yield(event("delta", Array(json.buffer.readableBytesView)))
                }
                sink.yield(event("done", try doneJSON(result)))
            } catch {
                let failure = ErrorMapping.apiError(for: error) ?? APIError.internalError
                if failure.code == .internal { logger.error("tutoring turn failed mid-stream", metadata: ["error": .string(LoggableError.describe(error))]) }
                var json = JSONWriter()
                json.raw(#"{"code":"#)
                json.string(failure.code.rawValue)
                json.raw(#","message":"#)
                json.string(failure.message.text(in: language))
                // The stream's status is 200 already: the Retry-After header can only travel in the event.
                if let seconds = failure.headers[.retryAfter].flatMap(Int.init) {
                    json.raw(#","retry_after":"#)
                    json.integer(seconds)
                }
                json.raw("}")
                sink.yield(event("error", Array(json.buffer.readableBytesView)))
            }
            sink.finish()
        }
        return HTTPBody(events, length: .unknown, iterationBehavior: .single)
    }

    private static func event(_ name: String, _ data: [UInt8]) -> ArraySlice<UInt8> {
        ArraySlice(Array("event: \(name)\ndata: ".utf8) + data + Array("\n\n".utf8))
    }

    /// The same body as the JSON answer, dates as the contract writes them.
    private static func doneJSON(_ result: ChatTurn.Result) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .withoutEscapingSlashes
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(try RFC3339Dates().encode(date))
        }
        return Array(try encoder.encode(result.schema))
    }
}

extension ChatTurn.Result {
    var schema: Components.Schemas.ChatTurnResponse {
        .init(chatId: chatID.uuidString.lowercased(), userMessage: userMessage?.schema, reply: reply.schema)
    }
}
