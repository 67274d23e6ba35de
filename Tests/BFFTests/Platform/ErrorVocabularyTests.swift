import Foundation
import HTTPTypes
import Testing

@testable import BFF
@testable import BFFPlatform

/// The contract's error codes (`openapi.yaml`, the "Errors" table and the error examples) and
/// `ErrorCode` are one vocabulary: a code added to either must be added to both, with one status.
@Suite("Error vocabulary", .timeLimit(.minutes(3)))
struct ErrorVocabularyTests {
    /// The Errors table of the contract's description: each documented code with its row's status.
    static func documentedCodes() throws -> [String: Int] {
        let text = try String(contentsOf: TestEnvironment.repository.appendingPathComponent("openapi.yaml"), encoding: .utf8)
        var codes: [String: Int] = [:]
        for line in text.split(separator: "\n") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count == 5, let status = Int(cells[1]), (400...599).contains(status) else { continue }
            for code in cells[3].split(separator: ",") {
                let name = code.trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "`"))
                #expect(codes[name] == nil, "\(name) is in two rows of the table")
                codes[name] = status
            }
        }
        return codes
    }

    @Test("every code of the contract's Errors table is an ErrorCode with the row's status, and every ErrorCode is in the table")
    func tableAndEnumAgree() throws {
        let documented = try Self.documentedCodes()
        #expect(documented.count >= 30, "the table was not found or not read")
        for (name, status) in documented {
            let code = try #require(ErrorCode(rawValue: name), "\(name) is documented but no ErrorCode")
            #expect(code.status.code == status, "\(name): the contract says \(status), ErrorCode \(code.status.code)")
        }
        for code in ErrorCode.allCases {
            #expect(documented[code.rawValue] != nil, "\(code.rawValue) is an ErrorCode the contract's table does not list")
        }
    }

    @Test("the contract's Error is open for generated clients: extra properties allowed, code an open enum of exactly the ErrorCodes")
    func errorSchemaIsOpen() throws {
        let text = try String(contentsOf: TestEnvironment.repository.appendingPathComponent("openapi.yaml"), encoding: .utf8)
        let error = try #require(text.firstRange(of: "\n    Error:\n").map { text[$0.upperBound...] })
        let schema = error.prefix(upTo: try #require(error.firstRange(of: "\n    ErrorCode:\n")).lowerBound)
        #expect(!schema.contains("additionalProperties: false"))
        #expect(schema.contains("additionalProperties: true"))
        #expect(schema.contains("anyOf:") && schema.contains("$ref: '#/components/schemas/ErrorCode'") && schema.contains("- type: string"))
        let enumLine = try #require(
            text.firstRange(of: "\n    ErrorCode:\n").map { text[$0.upperBound...] }?.firstMatch(of: /enum: \[([a-z_, ]+)\]/))
        let listed = enumLine.output.1.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        #expect(Set(listed) == Set(ErrorCode.allCases.map(\.rawValue)) && listed.count == ErrorCode.allCases.count)
    }

    @Test("every error example of the contract uses a documented code")
    func examplesUseDocumentedCodes() throws {
        let text = try String(contentsOf: TestEnvironment.repository.appendingPathComponent("openapi.yaml"), encoding: .utf8)
        let examples = text.matches(of: /\{code: ([a-z_]+), message:/).map { String($0.output.1) }
        #expect(!examples.isEmpty)
        for code in examples {
            #expect(ErrorCode(rawValue: code) != nil, "the example's \(code) is no ErrorCode")
        }
    }

    @Test("an APIError answers with its code's status and the code's sentence unless given one")
    func apiErrorDefaults() {
        for code in ErrorCode.allCases {
            let error = APIError(code)
            #expect(error.status == code.status && error.message == .error(code))
        }
        #expect(APIError(.notFound, .noSuchRecall).message == .noSuchRecall)
        #expect(CatalogueError.unknownSubject(field: "subject_id").apiError.message.text(in: .en) == "subject_id: no such subject.")
        #expect(CatalogueError.unknownSubject(field: "subject_id").apiError.message.text(in: .ja) == "subject_id: その教科は存在しません。")
        #expect(IdempotencyError.inProgress.apiError.status == .conflict)
        #expect(ErrorMapping.apiError(for: RefreshRefusal.revoked)?.code == .sessionRevoked)
        #expect(ErrorMapping.apiError(for: IdempotencyError.keyReused)?.code == .idempotencyKeyReused)
    }
}
