import BFFPlatform
import Foundation
import Hummingbird
import NIOCore

/// `GET /api/v1/chats` (listChats), served on the router directly rather than through the generated
/// server: the generated path encodes the page with `JSONEncoder`, which cost more than everything
/// else in the request together (docs/architecture.md#the-fast-path). Same contract, same repository, same errors; the
/// route table still records the operation, so 405s and the contract run see it as generated.
struct ChatListRoute: NativeRoute {
    static let method = HTTPRequest.Method.get
    static let path = "/api/v1/chats"

    let chats: ChatStore

    func respond(to request: Request, context: AppRequestContext) async throws -> Response {
        let principal = try context.principal()
        let query = request.uri.queryParameters
        var limit: Int?
        if let text = query["limit"] {
            guard let value = Int(text) else { throw APIError.validation("limit", .mustBeInteger) }
            limit = value
        }
        var updatedSince: Date?
        if let text = query["updated_since"] {
            do {
                updatedSince = try RFC3339Dates().decode(String(text))
            } catch {
                throw APIError.validation("updated_since", .notRFC3339(String(text.prefix(40))))
            }
        }
        let page = try await chats.page(
            userID: principal.userID, limit: limit, cursor: query["cursor"].map(String.init), updatedSince: updatedSince)
        return Response(
            status: .ok, headers: [.contentType: "application/json; charset=utf-8"],
            body: .init(byteBuffer: page.json()))
    }
}
