import BFFAPI
import BFFPlatform
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import OpenAPIRuntime

/// The account operations: deletion, and the export's generated form.
extension APIService {
    func deleteMe(_ input: Operations.DeleteMe.Input) async throws -> Operations.DeleteMe.Output {
        let principal = try AppRequestContext.principal()
        let outcome = try await accountDeletion.delete(principal)
        return .ok(
            .init(
                headers: .init(cacheControl: .noStore),
                body: .json(.init(deletedAt: outcome.deletedAt, storeSubscriptionActive: outcome.storeSubscriptionActive))))
    }

    /// The router serves the export natively, streamed (`AccountExport`); this answers the same
    /// document through the generated types, whole, for a transport that routes it here.
    func exportMe(_ input: Operations.ExportMe.Input) async throws -> Operations.ExportMe.Output {
        let principal = try AppRequestContext.principal()
        var collected = CollectingWriter()
        var lease = try await AccountExport.ExportLease.take(userID: principal.userID, export: accountExport)
        do {
            try await accountExport.write(userID: principal.userID, to: &collected, lease: &lease)
        } catch {
            await lease.release(export: accountExport)
            throw error
        }
        await lease.release(export: accountExport)
        let document = try JSONDecoder().decode(Components.Schemas.AccountExport.self, from: Data(buffer: collected.buffer))
        return .ok(.init(headers: .init(cacheControl: .noStore, contentDisposition: #"attachment; filename="export.json""#), body: .json(document)))
    }
}

extension AccountDeletionRefusal: DomainError {
    var apiError: APIError {
        switch self {
        case .sessionEnded: APIError.invalidToken(.sessionEnded)
        case .reauthenticationRequired: APIError(.reauthenticationRequired)
        }
    }
}

/// Also the answer of the native, streamed route (`AccountExport.register`).
extension ExportRefusal: DomainError {
    var apiError: APIError {
        switch self {
        case .accountGone: APIError.invalidToken(.accountGone)
        case .exportRunning(let retryAfter): APIError.rateLimited(retryAfter: retryAfter, .concurrentExports)
        }
    }
}

/// A response body gathered into one buffer.
private struct CollectingWriter: ResponseBodyWriter {
    var buffer = ByteBuffer()

    mutating func write(_ piece: ByteBuffer) async throws {
        var piece = piece
        buffer.writeBuffer(&piece)
    }

    consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}
}
